"""A worker killed with SIGKILL mid-run: the workflow completes on a fresh worker, nothing is lost or doubled."""

from __future__ import annotations

import asyncio
import signal
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from temporal_recall import RunPromptInput, RunPromptWorkflow
from temporal_recall.content import content_hash
from temporal_recall.testing import DevServer

from ._processes import spawn_worker, stop_worker

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


async def _wait_for(path: Path, seconds: float = 60) -> None:
    for _ in range(int(seconds * 10)):
        if path.exists():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f'{path} never appeared')


async def _assert_stored_once(read_store, conversation_id: str, expected: int) -> None:
    entries = await read_store.load_entries(conversation_id)
    hashes = [content_hash(e.message) for e in entries]
    assert len(entries) == expected
    assert len(set(hashes)) == expected
    report = await read_store.check()  # what `recall check` runs: chains, index, hashes, scopes all whole
    assert report.clean, '\n'.join(map(str, report.findings))


async def test_worker_killed_during_a_tool_activity(
    temporal_dev_server: DevServer, temporal_client: Client, store_url: str, read_store, tmp_path: Path
):
    queue = f'killed-tool-{uuid.uuid4()}'
    marker, go = tmp_path / 'tool-started', tmp_path / 'second-worker-go'
    first = spawn_worker(temporal_dev_server.address, queue, store_url, RECALL_TEST_TOOL_MARKER=str(marker))
    second = spawn_worker(temporal_dev_server.address, queue, store_url, RECALL_TEST_START_AFTER=str(go))
    try:
        handle = await temporal_client.start_workflow(
            RunPromptWorkflow.run,
            RunPromptInput(prompt='slow please', conversation_id='conv-killed-tool', agent='slow_tool'),
            id=f'killed-tool-{uuid.uuid4()}',
            task_queue=queue,
        )
        await _wait_for(marker)
        first.send_signal(signal.SIGKILL)
        first.wait()
        go.touch()  # the second worker, started alongside the first, takes over
        result = await asyncio.wait_for(handle.result(), timeout=90)
    finally:
        stop_worker(first)
        stop_worker(second)
    assert result.output == 'Done waiting.'
    await _assert_stored_once(read_store, 'conv-killed-tool', 4)


@pytest.mark.parametrize('kill_on', ['any', 'tool-call-response', 'final-response'])
async def test_worker_killed_after_a_store_commit_before_the_activity_completed(
    temporal_dev_server: DevServer, temporal_client: Client, store_url: str, read_store, tmp_path: Path, kill_on: str
):
    """SIGKILL right after a write inside a model activity committed: the retry on a fresh worker writes nothing twice.

    `any` is the first write (the prompt, before the model is called); the others kill the worker after it
    stored the response calling the tool (mid-run) or the final answer, before the activity could complete.
    """
    queue = f'killed-commit-{uuid.uuid4()}'
    marker, go = tmp_path / 'killed-after-commit', tmp_path / 'second-worker-go'
    conversation_id = f'conv-killed-{kill_on}'
    first = spawn_worker(
        temporal_dev_server.address,
        queue,
        store_url,
        RECALL_TEST_KILL_AFTER_COMMIT=str(marker),
        RECALL_TEST_KILL_ON=kill_on,
    )
    second = spawn_worker(temporal_dev_server.address, queue, store_url, RECALL_TEST_START_AFTER=str(go))
    try:
        handle = await temporal_client.start_workflow(
            RunPromptWorkflow.run,
            RunPromptInput(prompt='slow please', conversation_id=conversation_id, agent='slow_tool'),
            id=f'killed-commit-{uuid.uuid4()}',
            task_queue=queue,
        )
        await _wait_for(marker)
        first.wait(timeout=30)
        assert first.returncode == -signal.SIGKILL
        go.touch()  # the second worker, started alongside the first, takes over
        result = await asyncio.wait_for(handle.result(), timeout=90)
    finally:
        stop_worker(first)
        stop_worker(second)
    assert result.output == 'Done waiting.'
    await _assert_stored_once(read_store, conversation_id, 4)
    record = await read_store.read_record(conversation_id)
    assert record.branches == []
    stored = [type(entry.message).__name__ for entry in await read_store.load_entries(conversation_id)]
    assert stored == ['ModelRequest', 'ModelResponse', 'ModelRequest', 'ModelResponse']
