"""The worker's probes over real loopback HTTP: liveness follows the event loop, readiness follows
the worker, and the server holds up against clients that misbehave."""

from __future__ import annotations

import asyncio
import socket
import time
import urllib.error
import urllib.request

import pytest

from temporal_recall.errors import ConfigurationError, StoreUnavailable
from temporal_recall.worker._health import LOOP_TIMEOUT, STORE_TIMEOUT, serve_health


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f'http://127.0.0.1:{port}{path}', timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.read().decode()


async def test_liveness_is_200_while_the_loop_runs_and_503_while_it_is_blocked() -> None:
    async with serve_health(0, host='127.0.0.1', ready=lambda: True) as port:
        assert await asyncio.to_thread(get, port, '/healthz') == (200, 'ok\n')
        probe = asyncio.get_running_loop().run_in_executor(None, get, port, '/healthz')
        time.sleep(LOOP_TIMEOUT + 1)  # noqa: ASYNC251 -- blocks the loop, as runaway worker code would
        assert await probe == (503, 'event loop stuck\n')


async def test_readiness_follows_the_worker() -> None:
    state = {'ready': False}
    async with serve_health(0, host='127.0.0.1', ready=lambda: state['ready']) as port:
        assert (await asyncio.to_thread(get, port, '/readyz'))[0] == 503
        state['ready'] = True
        assert await asyncio.to_thread(get, port, '/readyz?verbose=1') == (200, 'ready\n')
        state['ready'] = False  # draining
        assert (await asyncio.to_thread(get, port, '/readyz'))[0] == 503


async def test_readiness_reports_the_store() -> None:
    answers = {'store': True}

    async def store() -> None:
        if not answers['store']:
            raise StoreUnavailable('Cannot reach the PostgreSQL store at postgresql://recall@db:5433/recall: refused.')

    async def silent_store() -> None:
        await asyncio.Event().wait()

    async with serve_health(0, host='127.0.0.1', ready=lambda: True, store=store) as port:
        assert await asyncio.to_thread(get, port, '/readyz') == (200, 'ready; the store answers\n')
        answers['store'] = False  # an outage after the worker started: it runs on, and the probe says why
        assert await asyncio.to_thread(get, port, '/readyz') == (
            503,
            'not ready: the store does not answer: Cannot reach the PostgreSQL store at '
            'postgresql://recall@db:5433/recall: refused.\n',
        )
        assert (await asyncio.to_thread(get, port, '/healthz'))[0] == 200, 'alive all the same: no restart'
    async with serve_health(0, host='127.0.0.1', ready=lambda: True, store=silent_store) as port:
        assert await asyncio.to_thread(get, port, '/readyz') == (
            503,
            f'not ready: the store did not answer within {STORE_TIMEOUT:.0f} s\n',
        )
    async with serve_health(0, host='127.0.0.1', ready=lambda: False, store=store) as port:
        assert await asyncio.to_thread(get, port, '/readyz') == (503, 'not ready\n')


async def test_other_paths_are_404_and_other_methods_501() -> None:
    async with serve_health(0, host='127.0.0.1', ready=lambda: True) as port:
        status, body = await asyncio.to_thread(get, port, '/metrics')
        assert status == 404 and '/healthz' in body
        request = urllib.request.Request(f'http://127.0.0.1:{port}/healthz', method='POST', data=b'')
        with pytest.raises(urllib.error.HTTPError) as refused:
            await asyncio.to_thread(urllib.request.urlopen, request, timeout=10)
        assert refused.value.code == 501
        refused.value.close()


async def test_a_silent_client_is_cut_off_and_does_not_block_probes() -> None:
    async with serve_health(0, host='127.0.0.1', ready=lambda: True) as port:
        # The socket's own timeout is a hang guard, well past the handler's 5 s read timeout; when the
        # server cuts the client off is not timed here (a loaded machine can stretch it).
        with socket.create_connection(('127.0.0.1', port), timeout=120) as silent:
            assert (await asyncio.to_thread(get, port, '/healthz'))[0] == 200, 'a silent client blocks no probe'
            assert await asyncio.to_thread(silent.recv, 100) == b'', 'the server closed the silent connection'


async def test_the_port_is_released_on_exit_and_a_busy_one_names_the_setting() -> None:
    async with serve_health(0, host='127.0.0.1', ready=lambda: True) as port:
        with pytest.raises(ConfigurationError, match='TEMPORAL_RECALL_HEALTH_PORT'):
            async with serve_health(port, host='127.0.0.1', ready=lambda: True):
                pass
    with socket.socket() as again:
        again.bind(('127.0.0.1', port))
