"""The README's codec setup on the embedded default: `RecallPlugin` and `message_codec_plugin` on one
SQLite file in one worker, with `recall` commands reading the file from other processes.

Every command sees every run committed before it started, and after the worker is SIGKILLed every
body each history references is in the store, so every history replays with the codec.
"""

from __future__ import annotations

import base64
import json
import signal
import uuid
from pathlib import Path

import pytest

from temporal_recall import RunPromptInput, RunPromptWorkflow, message_codec_plugin
from temporal_recall.codec import ENCODING
from temporal_recall.testing import DevServer, connect, export_history, replay

from ..cli._support import Ran, recall_process
from . import agents
from ._processes import spawn_worker, stop_worker

pytestmark = [pytest.mark.temporal, pytest.mark.slow]

CONVERSATIONS = 4
BATCHES = 3


def ok(ran: Ran) -> Ran:
    assert ran.returncode == 0, str(ran)
    return ran


def references(history: str) -> int:
    """How many payloads of `history` the codec replaced by references to bodies in the store."""
    found = 0
    for event in json.loads(history)['events']:
        for attributes in event.values():
            if not isinstance(attributes, dict):
                continue
            for field in ('input', 'result'):
                for payload in (attributes.get(field) or {}).get('payloads', []):
                    found += base64.b64decode(payload['metadata']['encoding']) == ENCODING
    return found


async def test_plugin_and_codec_on_one_file_lose_nothing(temporal_dev_server: DevServer, tmp_path: Path) -> None:
    url = f'sqlite:///{tmp_path / "myapp.db"}'
    queue = f'shared-file-{uuid.uuid4()}'
    worker = spawn_worker(temporal_dev_server.address, queue, url, RECALL_TEST_CODEC='1')
    codec = message_codec_plugin(url)  # the client's: a third store on the file, in this process
    client = await connect(temporal_dev_server, plugins=[codec])
    stored: dict[str, int] = {}
    workflow_ids: list[str] = []
    try:
        for batch in range(BATCHES):
            for n in range(CONVERSATIONS):
                conversation, workflow_id = f'shared-{n}', f'shared-file-{batch}-{n}-{uuid.uuid4()}'
                output = await client.execute_workflow(
                    RunPromptWorkflow.run,
                    RunPromptInput(prompt=f'weather, batch {batch}', conversation_id=conversation, agent='weather'),
                    id=workflow_id,
                    task_queue=queue,
                )
                stored[conversation] = stored.get(conversation, 0) + output.new_messages
                workflow_ids.append(workflow_id)
            # Other processes, each started after those runs committed, see all of them.
            stats = ok(recall_process('stats', '--store', url, '--format', 'json')).json()['stats']
            assert (stats['conversations'], stats['entries']) == (CONVERSATIONS, sum(stored.values())), stats
            shown = f'shared-{batch % CONVERSATIONS}'
            messages = ok(recall_process('show', shown, '--store', url, '--format', 'json')).json()['messages']
            assert len(messages) == stored[shown]
            hits = ok(recall_process('search', 'all', 'batch', str(batch), '--store', url, '--format', 'json'))
            assert {hit['conversation_id'] for hit in hits.json()['hits']} == set(stored)
            ok(recall_process('check', '--store', url))
        histories = [await export_history(client, workflow_id) for workflow_id in workflow_ids]
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        assert worker.returncode == -signal.SIGKILL
    finally:
        stop_worker(worker)
        await codec.codec.aclose()

    assert len(histories) == BATCHES * CONVERSATIONS
    assert all(references(history) for history in histories)  # the codec was at work in every one
    ok(recall_process('check', '--store', url))  # every body a stored body references is there too
    fresh = message_codec_plugin(url)
    try:
        results = await replay(histories, agents=[agents.weather_agent], plugins=[fresh])
    finally:
        await fresh.codec.aclose()
    failures = {key: result.replay_failure for key, result in results.replay_failures.items() if result.replay_failure}
    assert not failures
