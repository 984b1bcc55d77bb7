"""The worker process as an operator runs it: settings from the environment, structured logs, the
probes, Prometheus metrics, a real conversation, a clean exit on SIGTERM, `--help` without a
server, and one-line errors when the server or the store cannot be reached."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from temporalio.client import Client

from temporal_recall import RunPromptInput, RunPromptWorkflow
from temporal_recall._devserver import free_port
from temporal_recall.testing import DevServer
from temporal_recall.worker._run import CONNECT_TIMEOUT

from ..store._support import PostgresSite, postgres_url

pytestmark = [pytest.mark.temporal, pytest.mark.slow]

BIN = Path(sys.executable).parent
ENTRY_POINTS = {
    'script': [str(BIN / 'temporal-recall-worker')],
    'module': [sys.executable, '-m', 'temporal_recall.worker'],
    'recall': [str(BIN / 'recall'), 'worker'],
}


AGENTS = {'TEMPORAL_RECALL_AGENTS': 'temporal_recall.demo:agent'}


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.read().decode()
    except OSError:
        return 0, ''


async def test_worker_module_serves_a_run_and_stops_cleanly_on_sigterm(
    temporal_dev_server: DevServer, temporal_client: Client, tmp_path: Path
):
    queue = f'worker-main-{uuid.uuid4()}'
    health, metrics = free_port(), free_port()
    env = {
        **os.environ,
        'TEMPORAL_ADDRESS': temporal_dev_server.address,
        'TEMPORAL_RECALL_TASK_QUEUE': queue,
        'TEMPORAL_RECALL_STORE': str(tmp_path / 'worker.db'),
        'TEMPORAL_RECALL_HEALTH_PORT': str(health),
        'TEMPORAL_RECALL_METRICS_PORT': str(metrics),
    }
    # --demo: without TEMPORAL_RECALL_AGENTS the worker serves no agent unless asked for the demo's.
    process = subprocess.Popen([*ENTRY_POINTS['module'], '--demo'], env=env, stderr=subprocess.PIPE, text=True)
    try:
        # A hang guard only (start-up time is not what is tested): a loaded machine takes many seconds to
        # import the worker; a process that exited is reported at once.
        deadline = time.monotonic() + 300
        while (await asyncio.to_thread(_get, f'http://127.0.0.1:{health}/readyz'))[0] != 200:
            assert process.poll() is None, f'the worker exited {process.returncode} before it was ready'
            assert time.monotonic() < deadline, 'the worker never became ready'
            await asyncio.sleep(0.2)
        assert (await asyncio.to_thread(_get, f'http://127.0.0.1:{health}/healthz'))[0] == 200
        assert (await asyncio.to_thread(_get, f'http://127.0.0.1:{health}/metrics'))[0] == 404
        result = await temporal_client.execute_workflow(
            RunPromptWorkflow.run,
            RunPromptInput(prompt='Where is order B-77?', conversation_id='worker-main'),
            id=f'worker-main-{uuid.uuid4()}',
            task_queue=queue,
        )
        assert 'B-77' in result.output
        status, scraped = await asyncio.to_thread(_get, f'http://127.0.0.1:{metrics}/metrics')
        assert status == 200
        writes = [line for line in scraped.splitlines() if line.startswith('temporal_recall_step_writes{')]
        assert writes and all(f'task_queue="{queue}"' in line for line in writes)
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.to_thread(process.communicate, timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, stderr
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith('{')]
    messages = [line['msg'] for line in lines]
    assert 'worker started' in messages and 'worker stopped' in messages
    started = next(line for line in lines if line['msg'] == 'worker started')
    assert started['startup_objects_frozen'] > 10_000  # the heap startup built, out of later collections
    assert (await asyncio.to_thread(_get, f'http://127.0.0.1:{health}/healthz'))[0] == 0, 'the probe port is closed'


def _run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # The timeout only keeps a hung process from hanging the suite; how fast it exits is not asserted
    # (imports alone took 9 s on a loaded machine). What a bound stood for is asserted instead: the
    # error is the first attempt's own (no retry loop), or names the configured timeout.
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize('entry', ENTRY_POINTS)
def test_help_answers_without_a_server(entry: str):
    nowhere = f'127.0.0.1:{free_port()}'  # nothing listens: a connection attempt would fail
    ran = _run([*ENTRY_POINTS[entry], '--help'], {**os.environ, 'TEMPORAL_ADDRESS': nowhere})
    assert ran.returncode == 0, ran.stderr
    assert 'usage:' in ran.stdout.lower() and 'worker' in ran.stdout  # argparse's `usage:`, cyclopts' `Usage:`
    assert ran.stderr == ''


@pytest.mark.parametrize('entry', ENTRY_POINTS)
def test_an_unreachable_server_is_one_line_naming_the_address(entry: str, tmp_path: Path):
    nowhere = f'127.0.0.1:{free_port()}'
    env = {**os.environ, 'TEMPORAL_ADDRESS': nowhere, 'TEMPORAL_RECALL_STORE': str(tmp_path / 'w.db'), **AGENTS}
    ran = _run(ENTRY_POINTS[entry], env)
    assert ran.returncode == 1
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1, ran.stderr
    assert nowhere in lines[0] and 'TEMPORAL_ADDRESS' in lines[0]
    assert '(Connection refused)' in lines[0], 'the first refusal ends it: no retry loop, no timeout waited out'
    assert 'Traceback' not in ran.stderr


def test_a_server_that_never_answers_is_given_up_after_the_configured_timeout(tmp_path: Path):
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never answers
        silent.bind(('127.0.0.1', 0))
        silent.listen()
        address = f'127.0.0.1:{silent.getsockname()[1]}'
        env = {**os.environ, 'TEMPORAL_ADDRESS': address, 'TEMPORAL_RECALL_STORE': str(tmp_path / 'w.db'), **AGENTS}
        ran = _run(ENTRY_POINTS['module'], env)
    assert ran.returncode == 1
    assert f'cannot reach Temporal at {address} (no answer within {CONNECT_TIMEOUT:.0f} s)' in ran.stderr, ran.stderr


@pytest.mark.parametrize('entry', ENTRY_POINTS)
def test_a_store_that_cannot_open_is_one_line_naming_it(entry: str, temporal_dev_server: DevServer, tmp_path: Path):
    store = 'postgresql://recall:secret@127.0.0.1:1/recall?connect_timeout_ms=2000'
    env = {**os.environ, 'TEMPORAL_ADDRESS': temporal_dev_server.address, 'TEMPORAL_RECALL_STORE': store, **AGENTS}
    ran = _run(ENTRY_POINTS[entry], env)
    assert ran.returncode == 1
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1, ran.stderr
    assert '127.0.0.1:1' in lines[0] and 'TEMPORAL_RECALL_STORE' in lines[0]
    assert 'Connect call failed' in lines[0], 'the first refusal ends it: no retry loop, no timeout waited out'
    assert 'secret' not in ran.stderr, 'the password stays out of the message'
    assert 'Traceback' not in ran.stderr


def _missing_database() -> str:
    return urlunsplit(urlsplit(postgres_url())._replace(path=f'/no_such_db_{uuid.uuid4().hex[:8]}'))


@pytest.mark.parametrize(
    ('store', 'check'),
    [
        pytest.param(
            'postgresql://recall:secret@nohost.invalid:5432/recall?connect_timeout_ms=2000',
            'that the host and port in the store URL are right',
            id='no-such-host',
        ),
        pytest.param(
            _missing_database, 'Create the database (createdb)', id='no-such-database', marks=pytest.mark.postgres
        ),
    ],
)
def test_a_store_missing_at_start_stops_the_worker_with_one_line_naming_host_and_port(
    store: str | Callable[[], str], check: str, temporal_dev_server: DevServer
):
    url = store if isinstance(store, str) else store()
    host_and_port = urlsplit(url).netloc.rpartition('@')[2]
    env = {**os.environ, 'TEMPORAL_ADDRESS': temporal_dev_server.address, 'TEMPORAL_RECALL_STORE': url, **AGENTS}
    ran = _run(ENTRY_POINTS['script'], env)
    assert ran.returncode == 1, ran.stderr
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1 and 'Traceback' not in ran.stderr, ran.stderr
    assert host_and_port in lines[0] and check in lines[0] and 'TEMPORAL_RECALL_STORE' in lines[0]


class StoreLine:
    """A TCP relay to the store's server that can be cut, as a network outage looks to the worker:
    open connections are dropped and new ones are closed at once until it is restored."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.up = True
        self.open: set[asyncio.StreamWriter] = set()
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._relay, '127.0.0.1', 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _relay(self, client_reader: asyncio.StreamReader, client: asyncio.StreamWriter) -> None:
        if not self.up:
            client.transport.abort()
            return
        server_reader, server = await asyncio.open_connection(*self.target)
        self.open |= {client, server}

        async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            writer.transport.abort()

        await asyncio.gather(pipe(client_reader, server), pipe(server_reader, client))
        self.open -= {client, server}

    def cut(self) -> None:
        self.up = False
        for writer in self.open:
            writer.transport.abort()

    def restore(self) -> None:
        self.up = True

    async def close(self) -> None:
        self.cut()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


async def _until_ready(port: int, ready: bool) -> str:
    for _ in range(300):  # a hang guard: 60 s
        status, body = await asyncio.to_thread(_get, f'http://127.0.0.1:{port}/readyz')
        if (status == 200) == ready and status:
            return body
        await asyncio.sleep(0.2)
    raise AssertionError(f'/readyz never answered {"200" if ready else "503"}; last: {status} {body!r}')


@pytest.mark.postgres
async def test_a_store_outage_after_start_is_retried_and_readiness_reports_it(
    temporal_dev_server: DevServer, temporal_client: Client
):
    site = PostgresSite(postgres_url())
    server = urlsplit(site.url)
    line = StoreLine(server.hostname or '127.0.0.1', server.port or 5432)
    relayed = urlunsplit(server._replace(netloc=f'{server.netloc.rpartition("@")[0]}@127.0.0.1:{await line.start()}'))
    queue, health = f'outage-{uuid.uuid4()}', free_port()
    env = {
        **os.environ,
        'TEMPORAL_ADDRESS': temporal_dev_server.address,
        'TEMPORAL_RECALL_TASK_QUEUE': queue,
        'TEMPORAL_RECALL_STORE': relayed,
        'TEMPORAL_RECALL_HEALTH_PORT': str(health),
        **AGENTS,
    }
    process = subprocess.Popen(ENTRY_POINTS['module'], env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert await _until_ready(health, True) == 'ready; the store answers\n'
        line.cut()
        assert (await _until_ready(health, False)).startswith('not ready: the store ')
        handle = await temporal_client.start_workflow(
            RunPromptWorkflow.run,
            RunPromptInput(prompt='Where is order B-78?', conversation_id='outage-1'),
            id=f'outage-{uuid.uuid4()}',
            task_queue=queue,
        )
        for _ in range(300):  # a hang guard: 60 s
            pending = (await handle.describe()).raw_description.pending_activities
            if pending and pending[0].attempt >= 2:
                break
            await asyncio.sleep(0.2)
        else:
            raise AssertionError('no activity failed against the cut store and was retried')
        assert process.poll() is None, 'an outage after start does not stop the worker'
        line.restore()
        assert 'B-78' in (await asyncio.wait_for(handle.result(), timeout=120)).output
        assert await _until_ready(health, True) == 'ready; the store answers\n'
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.to_thread(process.communicate, timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
        await line.close()
        await site.close()
    assert process.returncode == 0, stderr
