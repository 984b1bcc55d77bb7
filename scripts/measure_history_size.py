"""Temporal history size with and without RecallDataCodec (a script, not a test).

.venv/bin/python scripts/measure_history_size.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from temporal_recall import RunPromptInput, RunPromptWorkflow
from temporal_recall._codec import message_codec_plugin
from temporal_recall.testing import connect, dev_server, running_worker


async def run(client, agent, store_url: str) -> tuple[int, int, int]:
    workflow_id = f'size-{uuid.uuid4()}'
    async with running_worker(client, agents=[agent], store=store_url) as worker:
        await client.execute_workflow(
            RunPromptWorkflow.run,
            RunPromptInput(
                prompt='go', conversation_id=workflow_id, agent=agent.name, continue_history=False, request_limit=None
            ),
            id=workflow_id,
            task_queue=worker.task_queue,
            execution_timeout=None,
        )
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    total = sum(event.ByteSize() for event in history.events)
    largest = 0
    for event in history.events:
        for field in ('activity_task_scheduled_event_attributes', 'activity_task_completed_event_attributes'):
            if event.HasField(field):
                attributes = getattr(event, field)
                payloads = (
                    attributes.input.payloads
                    if field.startswith('activity_task_scheduled')
                    else attributes.result.payloads
                )
                largest = max([largest, *(p.ByteSize() for p in payloads)])
    return total, largest, len(history.events)


async def main() -> None:
    from tests.workflows.agents import many_tools_agent, tool_loop_90_agent, tool_loop_200_agent

    with tempfile.TemporaryDirectory() as tmp:
        url = f'{tmp}/size.db'
        async with dev_server() as server:
            plain = await connect(server)
            plugin = message_codec_plugin(url)
            coded = await connect(server, plugins=[plugin])
            rows = []
            try:
                for label, client, agent in (
                    ('45 tool calls, no codec', plain, many_tools_agent),
                    ('90 tool calls, no codec', plain, tool_loop_90_agent),
                    ('45 tool calls, codec', coded, many_tools_agent),
                    ('200 tool calls, codec', coded, tool_loop_200_agent),
                ):
                    total, largest, events = await run(client, agent, url)
                    rows.append((label, (total, largest, events)))
                    print(
                        f'{label:26} history {total:>12,} B   largest payload {largest:>10,} B   events {events:>6,}',
                        flush=True,
                    )
            finally:
                await plugin.codec.aclose()
    (t45, _, _), (t90, _, _) = rows[0][1], rows[1][1]
    exponent = __import__('math').log(t90 / t45, 2)
    print(
        f'growth 45->90 calls without codec: x{t90 / t45:.2f} (exponent {exponent:.2f}); '
        f'extrapolated to 200 calls: {t45 * (200 / 45) ** exponent / 1e6:,.1f} MB'
    )


if __name__ == '__main__':
    asyncio.run(main())
