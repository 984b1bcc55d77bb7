"""Temporal history size with and without RecallDataCodec (a script, not a test).

    .venv/bin/python scripts/measure_history_size.py

Runs, on a local dev server, one agent whose tool answers about 1.8 KB (a weather forecast) with 45
and with 200 tool calls, with and without the codec, plus the 45-call agent of the test suite
whose tool answers one short sentence. Prints each history's total bytes, its largest payload, its
event count and how it ended (without the codec, the 200-call run is stopped by the server at its
50 MB history limit), and what the codec stored in its bodies table.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from temporalio.client import Client, WorkflowFailureError

from temporal_recall import RunPromptInput, RunPromptWorkflow, message_codec_plugin
from temporal_recall.testing import HistorySize, connect, dev_server, history_size, running_worker


async def run(client: Client, agent, store_url: str) -> HistorySize:
    workflow_id = f'size-{uuid.uuid4()}'
    request = RunPromptInput(
        prompt='go', conversation_id=workflow_id, agent=agent.name, continue_history=False, request_limit=None
    )
    async with running_worker(client, agents=[agent], store=store_url) as worker:
        with contextlib.suppress(WorkflowFailureError):  # how the run ended shows in its last event
            await client.execute_workflow(RunPromptWorkflow.run, request, id=workflow_id, task_queue=worker.task_queue)
    return await history_size(client, workflow_id)


def bodies_stored(path: str) -> tuple[int, int]:
    with sqlite3.connect(path) as db:
        count, size = db.execute('SELECT count(*), coalesce(sum(length(body)), 0) FROM message_bodies').fetchone()
    return count, size


async def main() -> None:
    from tests.workflows.agents import forecast_45_agent, forecast_200_agent, many_tools_agent

    with tempfile.TemporaryDirectory() as tmp:
        store_url = f'{tmp}/recall.db'
        async with dev_server() as server:
            plain = await connect(server)
            sizes: dict[str, HistorySize] = {}
            for label, agent, coded in (
                ('short answers, 45 calls, no codec', many_tools_agent, False),
                ('short answers, 45 calls, codec', many_tools_agent, True),
                ('1.8 KB answers, 45 calls, no codec', forecast_45_agent, False),
                ('1.8 KB answers, 45 calls, codec', forecast_45_agent, True),
                ('1.8 KB answers, 200 calls, codec', forecast_200_agent, True),
                ('1.8 KB answers, 200 calls, no codec', forecast_200_agent, False),
            ):
                bodies = f'{tmp}/bodies-{len(sizes)}.db'
                plugin = message_codec_plugin(bodies)
                try:
                    client = await connect(server, plugins=[plugin]) if coded else plain
                    size = sizes[label] = await run(client, agent, store_url)
                finally:
                    await plugin.codec.aclose()
                stored = ''
                if coded:
                    count, total = bodies_stored(bodies)
                    stored = f'   bodies stored {count:>6,} ({total:>10,} B)'
                ended = size.last_event.removeprefix('workflow_execution_').removesuffix('_event_attributes')
                print(
                    f'{label:36} history {size.total_bytes:>12,} B   largest payload {size.largest_payload:>9,} B'
                    f'   events {size.events:>6,}   {ended}{stored}',
                    flush=True,
                )
    for answers in ('short answers', '1.8 KB answers'):
        ratio = sizes[f'{answers}, 45 calls, codec'].total_bytes / sizes[f'{answers}, 45 calls, no codec'].total_bytes
        print(f'{answers}, 45 calls: with the codec the history is {ratio:.1%} of the history without it')


if __name__ == '__main__':
    asyncio.run(main())
