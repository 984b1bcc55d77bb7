"""`/healthz` and `/readyz` for Kubernetes probes, on the standard library's `http.server`.

Metrics are the Temporal runtime's Prometheus endpoint (`_metrics.prometheus_runtime`); the runtime
offers no health routes, so these two remain. `ThreadingHTTPServer` is the smallest well-known
stack for them: no dependency (uvicorn is only in the `api` extra), and it runs in its own thread,
so it never touches the worker's SIGTERM handling (uvicorn's `Server.serve` installs its own signal
handlers). It limits a request line to 64 KiB and a head to 100 headers; the handler's `timeout`
cuts off a client that sends nothing for 5 s. The port is for the cluster network only.

- `GET /healthz`: 200 while the worker's event loop runs a callback within `LOOP_TIMEOUT`; a loop
  blocked by runaway code answers 503, so the liveness probe restarts it.
- `GET /readyz`: 200 while `ready()` is true (the worker polls and is not draining), else 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator, Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

from ..errors import ConfigurationError

__all__ = ('LOOP_TIMEOUT', 'serve_health')

LOOP_TIMEOUT = 2.0
"""Seconds the event loop may take to run a no-op before `/healthz` reports it stuck."""


def _loop_responds(loop: asyncio.AbstractEventLoop) -> bool:
    ran = threading.Event()
    try:
        loop.call_soon_threadsafe(ran.set)
    except RuntimeError:  # the loop is closed
        return False
    return ran.wait(LOOP_TIMEOUT)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], ready: Callable[[], bool], loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(address, _Handler)
        self.ready = ready
        self.loop = loop


class _Handler(BaseHTTPRequestHandler):
    timeout = 5

    def do_GET(self) -> None:
        path = self.path.split('?', 1)[0]
        server = cast(_Server, self.server)
        if path == '/healthz':
            ok = _loop_responds(server.loop)
            self._reply(HTTPStatus.OK if ok else HTTPStatus.SERVICE_UNAVAILABLE, 'ok' if ok else 'event loop stuck')
        elif path == '/readyz':
            ok = server.ready()
            self._reply(HTTPStatus.OK if ok else HTTPStatus.SERVICE_UNAVAILABLE, 'ready' if ok else 'not ready')
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
async def serve_health(port: int, *, ready: Callable[[], bool], host: str = '0.0.0.0') -> AsyncGenerator[int]:
    """Serve the probes on `host:port` (0: any free port) for the block; yields the bound port."""
    try:
        server = _Server((host, port), ready, asyncio.get_running_loop())
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
