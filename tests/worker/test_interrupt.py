"""Ctrl-C on `recall worker`: the first drains, the second stops at once, and the exit status is 130."""

from __future__ import annotations

import asyncio
import logging
import re
import signal
import subprocess
import sys
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
    # Only log lines (the SDK logs the cancelled activity with its stack) and the line `recall` ends
    # every interrupted command with; no crash of the process itself.
    plain = [line for line in rest.splitlines() if line.strip() and not line.startswith(b'{')]
    assert plain == [b'interrupted'], rest.decode()
    await handle.terminate()


RUNS = 20
"""Each interrupt path is run this often: the crash in interpreter teardown came about once in 5 to 20 exits."""
ENTRY_POINTS = ([*RECALL, 'worker'], [sys.executable, '-m', 'temporal_recall.worker'])
DOCUMENTED = {'SIGINT once': 130, 'SIGINT twice': 130, 'SIGTERM': 0}


async def _interrupted_exit(path: str, run: int, address: str, folder: Path) -> tuple[int | None, str, int]:
    """Start a worker (the two entry points in turn), interrupt it along `path`, and return how it ended
    (its status, what it said) and its pid.

    The second Ctrl-C comes 0 to 450 ms after the worker says it is shutting down, so across the runs
    it lands while the worker drains, while the event loop closes, and after: the exit must be ours
    wherever it lands.
    """
    env = clean_env(
        TEMPORAL_ADDRESS=address,
        TEMPORAL_RECALL_TASK_QUEUE=f'exits-{uuid.uuid4()}',
        TEMPORAL_RECALL_STORE=str(folder / f'{run}-{uuid.uuid4().hex[:6]}.db'),
        TEMPORAL_RECALL_AGENTS='temporal_recall.demo:agent',
    )
    process = await asyncio.create_subprocess_exec(
        *ENTRY_POINTS[run % 2], cwd=ROOT, env=env,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert process.stderr is not None
    seen = b''
    try:
        seen += await _stderr_until(process.stderr, b'worker started')
        process.send_signal(signal.SIGTERM if path == 'SIGTERM' else signal.SIGINT)
        if path == 'SIGINT twice':
            seen += await _stderr_until(process.stderr, b'shutting down')
            await asyncio.sleep((run // 2 % 10) * 0.05)
            if process.returncode is None:  # gone already: a signal now could reach another process
                process.send_signal(signal.SIGINT)
        seen += await asyncio.wait_for(process.stderr.read(), timeout=120)  # a hang guard, not a bound
        await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    return process.returncode, f'{" ".join(ENTRY_POINTS[run % 2][-2:])}, run {run}:\n{seen.decode()}', process.pid


class _LostStatuses(logging.Handler):
    """The pids whose exit status asyncio's child watcher lost: something else in this test process
    reaped the child first, and asyncio reports 255 for it ("Unknown child process pid"). The status
    is then the harness's, not the worker's."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.pids: set[int] = set()

    def emit(self, record: logging.LogRecord) -> None:
        found = re.match(r'Unknown child process pid (\d+)', record.getMessage())
        if found:
            self.pids.add(int(found[1]))


@pytest.mark.parametrize('path', DOCUMENTED)
async def test_every_interrupt_path_ends_with_its_documented_status(
    path: str, temporal_dev_server: DevServer, tmp_path: Path
) -> None:
    """Never a crash in interpreter teardown (`Fatal Python error: PyGILState_Release`, status 134),
    never a death by the signal itself (-2), never a traceback: 130 after Ctrl-C, 0 after SIGTERM."""
    three_at_a_time = asyncio.Semaphore(3)
    lost = _LostStatuses()
    logging.getLogger('asyncio').addHandler(lost)

    async def one(run: int) -> tuple[int | None, str]:
        how = ''
        for _ in range(3):  # a run whose status the harness lost says nothing: run it again
            async with three_at_a_time:
                status, how, pid = await _interrupted_exit(path, run, temporal_dev_server.address, tmp_path)
            if pid not in lost.pids:
                return status, how
            lost.pids.discard(pid)  # a later child may get the same pid
        return None, f'{how}\n(the exit status was lost three times)'

    try:
        ended = await asyncio.gather(*(one(run) for run in range(RUNS)))
    finally:
        logging.getLogger('asyncio').removeHandler(lost)
    unexpected = [f'status {status} ({how})' for status, how in ended if status != DOCUMENTED[path]]
    assert not unexpected, '\n\n'.join(unexpected)
    assert not [how for _, how in ended if 'Traceback' in how or 'Fatal Python error' in how]
