"""Ctrl-C on `recall worker`: the first drains, the second stops at once, and the exit status is 130."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from temporal_recall import RunPromptInput, RunPromptWorkflow
from temporal_recall.testing import DevServer

from ..cli._support import RECALL, clean_env

pytestmark = [pytest.mark.temporal, pytest.mark.slow]
ROOT = Path(__file__).parents[2]


async def _stderr_until(stream: asyncio.StreamReader, needle: bytes) -> bytes:
    seen = b''
    while needle not in seen:
        line = await stream.readline()
        assert line, f'the worker ended before logging {needle!r}:\n{seen.decode()}'
        seen += line
    return seen


async def test_ctrl_c_twice_with_an_activity_in_flight_stops_the_worker_with_130(
    temporal_client: Client, temporal_dev_server: DevServer, tmp_path: Path
) -> None:
    queue = f'interrupt-{uuid.uuid4()}'
    marker = tmp_path / 'tool-started'
    env = clean_env(
        TEMPORAL_ADDRESS=temporal_dev_server.address,
        TEMPORAL_RECALL_TASK_QUEUE=queue,
        TEMPORAL_RECALL_AGENTS='tests.worker.agents:waiting_agent',
        RECALL_TEST_TOOL_MARKER=str(marker),
    )
    process = await asyncio.create_subprocess_exec(
        *RECALL, 'worker', '--store', str(tmp_path / 'worker.db'),
        cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert process.stderr is not None
    try:
        await _stderr_until(process.stderr, b'worker started')
        handle = await temporal_client.start_workflow(
            RunPromptWorkflow.run,
            RunPromptInput(prompt='Wait for me', conversation_id='interrupted-1', agent='waiting'),
            id=f'interrupt-{uuid.uuid4()}',
            task_queue=queue,
        )
        while not marker.exists():  # the tool's activity is in flight  # noqa: ASYNC110 (a file, not an event)
            await asyncio.sleep(0.1)
        process.send_signal(signal.SIGINT)
        await _stderr_until(process.stderr, b'shutting down')
        process.send_signal(signal.SIGINT)
        # A hang guard only: before the fix the second Ctrl-C was ignored until the 90 s drain ended.
        rest = await asyncio.wait_for(process.stderr.read(), timeout=60)
        await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 130, rest.decode()
    assert b'stopping at once' in rest
    # Only log lines (the SDK logs the cancelled activity with its stack); no crash of the process itself.
    assert all(line.startswith(b'{') for line in rest.splitlines() if line.strip()), rest.decode()
    await handle.terminate()
