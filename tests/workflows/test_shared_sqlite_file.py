"""The README's codec setup on the embedded default: `RecallPlugin` and `message_codec_plugin` on one
SQLite file in one worker, with `recall` commands and the codec server reading the file from other
processes.

Every command sees every run committed before it started, the codec server decodes every reference
of the histories so far, and after the worker is SIGKILLed every body each history references is in
the store, so every history replays with the codec.
"""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from temporal_recall import RunPromptInput, RunPromptWorkflow, message_codec_plugin
from temporal_recall.codec import ENCODING
from temporal_recall.testing import DevServer, connect, export_history, replay

from ..api._http import Client, free_port
from ..cli._support import Ran, recall_process
from . import agents
from ._processes import spawn_worker, stop_worker

pytestmark = [pytest.mark.temporal, pytest.mark.slow]

CONVERSATIONS = 4
BATCHES = 3
OPERATOR = 'operator-token-of-this-test'


def ok(ran: Ran) -> Ran:
    assert ran.returncode == 0, str(ran)
    return ran


def references(history: str) -> list[dict[str, Any]]:
    """The payloads of `history` that the codec replaced by references to bodies in the store."""
    found: list[dict[str, Any]] = []
    for event in json.loads(history)['events']:
        for attributes in event.values():
            if not isinstance(attributes, dict):
                continue
            for field in ('input', 'result'):
                for payload in (attributes.get(field) or {}).get('payloads', []):
                    if base64.b64decode(payload['metadata']['encoding']) == ENCODING:
                        found.append(payload)
    return found


@dataclass(frozen=True)
class CodecServer:
    client: Client
    process: subprocess.Popen[bytes]


@contextmanager
def codec_server(url: str, folder: Path) -> Iterator[CodecServer]:
    """`recall codec-server` on the store, in its own process, for the whole test."""
    tokens = folder / 'tokens.json'
    tokens.write_text(json.dumps({OPERATOR: None}))  # the bodies stored without a scope
    port = free_port()
    command = [sys.executable, '-m', 'temporal_recall.cli', 'codec-server', '--tokens', str(tokens)]
    process = subprocess.Popen(
        [*command, '--store', url, '--port', str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        yield CodecServer(Client('127.0.0.1', port), process)
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=60)
        assert process.returncode in (0, -signal.SIGTERM), stderr


async def undecoded(server: CodecServer, histories: list[str]) -> int:
    """How many referenced payloads of `histories` the codec server hands back still as references."""
    payloads = [payload for history in histories for payload in references(history)]
    while True:
        try:
            answer = server.client.post('/decode', token=OPERATOR, json_body={'payloads': payloads})
            break
        except ConnectionRefusedError:  # still starting: its process imports for a few seconds
            assert server.process.poll() is None, 'recall codec-server exited'
            await asyncio.sleep(0.2)
    assert answer.status == 200, answer.body
    decoded = answer.json()['payloads']
    assert len(decoded) == len(payloads)
    return sum(base64.b64decode(payload['metadata']['encoding']) == ENCODING for payload in decoded)


async def test_plugin_and_codec_on_one_file_lose_nothing(temporal_dev_server: DevServer, tmp_path: Path) -> None:
    url = f'sqlite:///{tmp_path / "myapp.db"}'
    queue = f'shared-file-{uuid.uuid4()}'
    worker = spawn_worker(temporal_dev_server.address, queue, url, RECALL_TEST_CODEC='1')
    codec = message_codec_plugin(url)  # the client's: a third store on the file, in this process
    client = await connect(temporal_dev_server, plugins=[codec])
    stored: dict[str, int] = {}
    workflow_ids: list[str] = []
    try:
        with codec_server(url, tmp_path) as server:
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
                # And the codec server, up since the start, decodes every reference written so far.
                histories = [await export_history(client, workflow_id) for workflow_id in workflow_ids]
                assert await undecoded(server, histories) == 0
            worker.send_signal(signal.SIGKILL)
            worker.wait()
            assert worker.returncode == -signal.SIGKILL
            assert await undecoded(server, histories) == 0
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
