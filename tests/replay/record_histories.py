"""Re-record the histories under tests/replay/histories/ from real runs on a local dev server.

    .venv/bin/python -m tests.replay.record_histories          # everything
    .venv/bin/python -m tests.replay.record_histories codec    # only the RecallDataCodec history
    .venv/bin/python -m tests.replay.record_histories failed_turn    # only the conversation with a failed turn

Run it after a deliberate, versioned change to workflow code, and commit the new files together
with the change. Each scenario is one JSON file (a continue-as-new chain gives one file per run).

Every folder of recordings is kept as it is, never re-recorded, because workflows started under
that code must still replay:
- histories/ itself: before persistence moved into the model-request activities (a `store_step` per
  boundary), under pydantic-ai 2.68;
- histories/in_activity/: in-activity persistence, step markers in canonical form 1, under 2.68;
- histories/pydantic_ai_2_78/: the same code (779acbc) under pydantic-ai 2.78;
- histories/canonical_form_2/: markers in form 2, tool calls stamped in the activity, under 2.78;
- histories/reload_after_failed_turn/: the same, with recall's activities heartbeating and a
  `ConversationWorkflow` turn after a failed one reloading the stored conversation (a patch marker).
New recordings go to a new folder (`RECORDING` below); the recorder refuses to write over a file.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError

from temporal_recall import (
    ConversationInput,
    ConversationWorkflow,
    RunPromptInput,
    RunPromptWorkflow,
    TurnInput,
    message_codec_plugin,
)
from temporal_recall.testing import connect, dev_server, export_history, running_worker

from ..workflows.agents import (
    flaky_agent,
    output_tool_agent,
    recall_agent,
    slow_tool_agent,
    streaming_agent,
    weather_agent,
)
from .workflows import RecallDirectlyWorkflow

RECORDING = 'reload_after_failed_turn'
"""The folder today's code records into, under histories/ and codec/."""
HISTORIES = Path(__file__).parent / 'histories' / RECORDING
CODEC = Path(__file__).parent / 'codec' / RECORDING
"""A history recorded with `RecallDataCodec`, and the bodies database it references (its only source).
codec/ itself holds the one recorded before in-activity persistence, with its own bodies.db."""
AGENTS = [weather_agent, recall_agent, slow_tool_agent, output_tool_agent, streaming_agent, flaky_agent]


def _save(name: str, history_json: str) -> None:
    HISTORIES.mkdir(exist_ok=True)
    if (HISTORIES / f'{name}.json').exists():
        raise SystemExit(f'{HISTORIES / name}.json exists: recorded histories are never re-recorded (see above).')
    # Pretty-printed so diffs of re-recorded histories are readable.
    (HISTORIES / f'{name}.json').write_text(json.dumps(json.loads(history_json), indent=1) + '\n')
    print(f'recorded {name}')


async def record(client, store_url: str) -> None:
    async with running_worker(client, agents=AGENTS, store=store_url, workflows=[RecallDirectlyWorkflow]) as worker:
        queue = worker.task_queue
        await client.execute_workflow(
            RunPromptWorkflow.run,
            RunPromptInput(prompt='Weather in Paris?', conversation_id='replay-conv', agent='weather'),
            id='replay-one-prompt-tool',
            task_queue=queue,
        )
        _save('one_prompt_with_tool', await export_history(client, 'replay-one-prompt-tool'))

        await client.execute_workflow(
            RunPromptWorkflow.run,
            RunPromptInput(prompt='recall Paris', conversation_id='replay-conv', agent='recaller'),
            id='replay-model-recall',
            task_queue=queue,
        )
        _save('model_calls_recall_tool', await export_history(client, 'replay-model-recall'))

        await client.execute_workflow(
            RecallDirectlyWorkflow.run, 'replay-conv', id='replay-workflow-recall', task_queue=queue
        )
        _save('workflow_calls_recall', await export_history(client, 'replay-workflow-recall'))

        for agent, name in (('output_tool', 'output_tool'), ('streaming', 'streaming_with_tools')):
            await client.execute_workflow(
                RunPromptWorkflow.run,
                RunPromptInput(prompt='Weather in Paris?', conversation_id=f'replay-{name}', agent=agent),
                id=f'replay-{name}',
                task_queue=queue,
            )
            _save(name, await export_history(client, f'replay-{name}'))

        handle = await client.start_workflow(
            RunPromptWorkflow.run,
            RunPromptInput(
                prompt='Weather in Paris?', conversation_id='replay-error', agent='weather', request_limit=1
            ),
            id='replay-error-after-tool-calls',
            task_queue=queue,
        )
        with contextlib.suppress(WorkflowFailureError):
            await handle.result()
        _save('error_after_tool_calls', await export_history(client, 'replay-error-after-tool-calls'))

        handle = await client.start_workflow(
            ConversationWorkflow.run,
            ConversationInput(conversation_id='replay-chat', agent='weather', turns_per_run=2),
            id='replay-conversation',
            task_queue=queue,
        )
        for turn in range(5):
            await client.get_workflow_handle('replay-conversation').execute_update(
                ConversationWorkflow.send, TurnInput(prompt=f'turn {turn}')
            )
        await client.get_workflow_handle('replay-conversation').signal(ConversationWorkflow.close)
        await client.get_workflow_handle('replay-conversation').result()
        runs = [run async for run in client.list_workflows("WorkflowId = 'replay-conversation'")]
        for index, run in enumerate(sorted(runs, key=lambda r: r.start_time)):
            _save(
                f'conversation_run_{index + 1}', await export_history(client, 'replay-conversation', run_id=run.run_id)
            )
        del handle


async def record_failed_turn(client, store_url: str) -> None:
    """A `ConversationWorkflow` whose second turn's model request fails for good, then a third turn."""
    async with running_worker(client, agents=AGENTS, store=store_url) as worker:
        handle = await client.start_workflow(
            ConversationWorkflow.run,
            ConversationInput(conversation_id='replay-failed-turn', agent='flaky', turns_per_run=10),
            id='replay-conversation-failed-turn',
            task_queue=worker.task_queue,
        )
        for prompt in ('Weather in Oslo?', 'fail: and in Madrid?', 'And in Rome?'):
            with contextlib.suppress(WorkflowUpdateFailedError):
                await handle.execute_update(ConversationWorkflow.send, TurnInput(prompt=prompt))
        await handle.signal(ConversationWorkflow.close)
        await handle.result()
    _save('conversation_failed_turn', await export_history(client, 'replay-conversation-failed-turn'))


async def record_killed_worker(server_address: str, client, store_url: str) -> None:
    """A run whose worker is SIGKILLed during a tool activity and recovered by a fresh worker."""
    queue = f'replay-killed-{uuid.uuid4()}'
    env = {
        **os.environ,
        'RECALL_TEST_ADDRESS': server_address,
        'RECALL_TEST_QUEUE': queue,
        'RECALL_TEST_STORE': store_url,
    }
    command = [sys.executable, '-m', 'tests.workflows.worker_process']
    first = subprocess.Popen(command, env=env)
    try:
        handle = await client.start_workflow(
            RunPromptWorkflow.run,
            RunPromptInput(prompt='slow please', conversation_id='replay-killed', agent='slow_tool'),
            id='replay-killed-worker',
            task_queue=queue,
        )
        marker = Path(tempfile.gettempdir()) / 'slow-tool-started'
        for _ in range(300):
            if marker.exists():
                break
            await asyncio.sleep(0.1)
        first.send_signal(signal.SIGKILL)
        first.wait()
    finally:
        if first.poll() is None:
            first.kill()
    second = subprocess.Popen(command, env=env)
    try:
        await handle.result()
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=30)
    _save('worker_killed_mid_run', await export_history(client, 'replay-killed-worker'))


async def record_codec(server, store_url: str, folder: Path) -> None:
    """A tool run whose payloads went through RecallDataCodec; its bodies are saved next to it."""
    bodies = folder / 'bodies.db'
    plugin = message_codec_plugin(str(bodies))
    try:
        client = await connect(server, plugins=[plugin])
        async with running_worker(client, agents=AGENTS, store=store_url) as worker:
            await client.execute_workflow(
                RunPromptWorkflow.run,
                RunPromptInput(prompt='Weather in Paris?', conversation_id='replay-codec', agent='weather'),
                id='replay-codec-tool',
                task_queue=worker.task_queue,
            )
        history = await export_history(client, 'replay-codec-tool')
    finally:
        await plugin.codec.aclose()
    CODEC.mkdir(exist_ok=True)
    if (CODEC / 'one_prompt_with_tool.json').exists():
        raise SystemExit(f'{CODEC} holds a recording already: recorded histories are never re-recorded.')
    (CODEC / 'one_prompt_with_tool.json').write_text(json.dumps(json.loads(history), indent=1) + '\n')
    # One self-contained file (no WAL), holding only what this history references.
    target = CODEC / 'bodies.db'
    target.unlink(missing_ok=True)
    with sqlite3.connect(bodies) as source:
        source.execute('VACUUM INTO ?', (str(target),))
    print(f'recorded {CODEC}/one_prompt_with_tool.json with its bodies.db')


async def main(scenarios: list[str]) -> None:
    everything = not scenarios
    with tempfile.TemporaryDirectory() as tmp:
        store_url = f'sqlite:///{tmp}/record.db'
        async with dev_server() as server:
            client = await connect(server)
            if everything:
                await record(client, store_url)
                await record_killed_worker(server.address, client, store_url)
            if everything or 'failed_turn' in scenarios:
                await record_failed_turn(client, store_url)
            if everything or 'codec' in scenarios:
                await record_codec(server, store_url, Path(tmp))


if __name__ == '__main__':
    asyncio.run(main(sys.argv[1:]))
