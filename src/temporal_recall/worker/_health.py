"""`/healthz` and `/readyz` for Kubernetes probes, on the standard library's `http.server`.

Metrics are the Temporal runtime's Prometheus endpoint (`_metrics.prometheus_runtime`); the runtime
offers no health routes, so these two remain. `ThreadingHTTPServer` is the smallest well-known
stack for them: no dependency (uvicorn is only in the `api` extra), and it runs in its own thread,
so it never touches the worker's SIGTERM handling (uvicorn's `Server.serve` installs its own signal
handlers). It keeps the standard library's bounds on a request line and its headers, and the
handler's `timeout` cuts off a client that sends nothing. The port is for the cluster network only.

- `GET /healthz`: 200 while the worker's event loop runs a callback within `LOOP_TIMEOUT`; a loop
  blocked by runaway code answers 503, so the liveness probe restarts it.
- `GET /readyz`: 200 while `ready()` is true (the worker polls and is not draining) and, when given
  a `store` check, the store answers it within `STORE_TIMEOUT`; else 503. The body says which: a
  store that stopped answering after the worker started is retried through the activities, not
  fatal, so the probe is where an operator sees it (`not ready: the store does not answer: ...`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

from ..errors import ConfigurationError

__all__ = ('LOOP_TIMEOUT', 'STORE_TIMEOUT', 'serve_health')

LOOP_TIMEOUT = 2.0
"""Seconds the event loop may take to run a no-op before `/healthz` reports it stuck."""
STORE_TIMEOUT = 2.0
"""Seconds `/readyz` waits for the store's answer: within the deployments' 3 s probe timeout."""


def _loop_responds(loop: asyncio.AbstractEventLoop) -> bool:
    ran = threading.Event()
    try:
        loop.call_soon_threadsafe(ran.set)
    except RuntimeError:  # the loop is closed
        return False
    return ran.wait(LOOP_TIMEOUT)


def _store_problem(check: Callable[[], Awaitable[object]], loop: asyncio.AbstractEventLoop) -> str | None:
    """Why the store did not answer `check` (run on the worker's loop, which owns its connections), or `None`."""

    async def checked() -> object:  # a coroutine for `run_coroutine_threadsafe`, whatever `check` returns
        return await check()

    try:
        answer = asyncio.run_coroutine_threadsafe(checked(), loop)
    except RuntimeError:  # the loop is closed
        return 'the worker has stopped'
    try:
        answer.result(STORE_TIMEOUT)
    except TimeoutError:
        answer.cancel()
        return f'the store did not answer within {STORE_TIMEOUT:.0f} s'
    except Exception as error:
        return f'the store does not answer: {" ".join(str(error).split()) or type(error).__name__}'
    return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        ready: Callable[[], bool],
        loop: asyncio.AbstractEventLoop,
        store: Callable[[], Awaitable[object]] | None,
    ) -> None:
        super().__init__(address, _Handler)
        self.ready = ready
        self.loop = loop
        self.store = store

    def readiness(self) -> tuple[HTTPStatus, str]:
        if not self.ready():
            return HTTPStatus.SERVICE_UNAVAILABLE, 'not ready'
        if self.store is None:
            return HTTPStatus.OK, 'ready'
        problem = _store_problem(self.store, self.loop)
        if problem is not None:
            return HTTPStatus.SERVICE_UNAVAILABLE, f'not ready: {problem}'
        return HTTPStatus.OK, 'ready; the store answers'


class _Handler(BaseHTTPRequestHandler):
    timeout = 5

    def do_GET(self) -> None:
        path = self.path.split('?', 1)[0]
        server = cast(_Server, self.server)
        if path == '/healthz':
            ok = _loop_responds(server.loop)
            self._reply(HTTPStatus.OK if ok else HTTPStatus.SERVICE_UNAVAILABLE, 'ok' if ok else 'event loop stuck')
        elif path == '/readyz':
            self._reply(*server.readiness())
        else:
            self._reply(HTTPStatus.NOT_FOUND, 'not found; this endpoint serves /healthz and /readyz')

    def _reply(self, status: HTTPStatus, text: str) -> None:
        body = f'{text}\n'.encode()
        self.send_response(status)
        self.send_header('Content-Type', 'text/plain; charset=utf-8')
        self.send_header('Content-Length', str(len(body)))
        self.send_header('Cache-Control', 'no-store')
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Probes arrive every few seconds; logging each would drown the worker's own log."""


@contextlib.asynccontextmanager
async def serve_health(
    port: int,
    *,
    ready: Callable[[], bool],
    store: Callable[[], Awaitable[object]] | None = None,
    host: str = '0.0.0.0',
) -> AsyncGenerator[int]:
    """Serve the probes on `host:port` (0: any free port) for the block; yields the bound port.

    `store`, when given, is awaited on this loop by every `/readyz` after `ready()`: it returns when
    the store answers and raises when it does not.
    """
    try:
        server = _Server((host, port), ready, asyncio.get_running_loop(), store)
    except OSError as error:
        raise ConfigurationError(
            f'Cannot serve health checks on {host}:{port} ({error.strerror or error}); '
            'free that port or set TEMPORAL_RECALL_HEALTH_PORT to another one.'
        ) from error
    thread = threading.Thread(target=server.serve_forever, name='temporal-recall-health', daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        await asyncio.to_thread(server.shutdown)
        server.server_close()
