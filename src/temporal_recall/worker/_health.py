"""Liveness, readiness and metrics over plain HTTP/1.1, for Kubernetes probes and Prometheus.

A web framework would be a large dependency for three GET routes, so this is `asyncio.start_server`
plus a deliberately small request parser. It reads only the request line and headers (a probe
never needs a body), answers once and closes (`Connection: close`, no keep-alive), and protects
the worker from clients that misbehave:

- the whole request head must arrive within `read_timeout` seconds (slowloris clients are cut
  off with 408, however slowly they trickle bytes; after an error response the connection
  lingers at most one more second so that the client can read it),
- the head may be at most `MAX_HEAD_BYTES` (8 KiB); larger heads get 431,
- at most `max_connections` connections are served at once; more are closed unanswered.

Routes: `GET /healthz` (liveness: answers while the event loop runs), `GET /readyz` (readiness:
200 once the worker polls, 503 before that and once shutdown begins) and `GET /metrics`
(Prometheus text format from `temporal_recall._metrics`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from http import HTTPStatus
from typing import Protocol

from .._metrics import CONTENT_TYPE, render
from ..errors import ConfigurationError

__all__ = ('MAX_HEAD_BYTES', 'HealthServer', 'PollingWorker')

log = logging.getLogger('temporal_recall.worker.health')

MAX_HEAD_BYTES = 8 * 1024
"""Largest request line plus headers accepted; probes and scrapers send a few hundred bytes."""

_TEXT = 'text/plain; charset=utf-8'
_ROUTES = ('/healthz', '/readyz', '/metrics')
_LINGER_SECONDS = 1.0
_LINGER_BYTES = 64 * 1024
_OVERLOAD_LOG_INTERVAL = 60.0


class PollingWorker(Protocol):
    """What readiness needs from a worker; `temporalio.worker.Worker` satisfies it."""

    @property
    def is_running(self) -> bool: ...


def _response(status: HTTPStatus, body: str, *, content_type: str = _TEXT, headers: tuple[str, ...] = ()) -> bytes:
    payload = body.encode()
    head = [
        f'HTTP/1.1 {status.value} {status.phrase}',
        f'Content-Type: {content_type}',
        f'Content-Length: {len(payload)}',
        'Cache-Control: no-store',
        'Connection: close',
        *headers,
    ]
    return ('\r\n'.join(head) + '\r\n\r\n').encode('ascii') + payload


def _parse_request_line(head: bytes) -> tuple[str, str] | None:
    """(method, path) from a request head, or `None` if it is not an HTTP/1.x request line."""
    line = head.lstrip(b'\r\n').split(b'\r\n', 1)[0]
    try:
        method, target, version = line.decode('ascii').split(' ')
    except ValueError:  # not ASCII (UnicodeDecodeError is a ValueError) or not three parts
        return None
    if not method.isalpha() or not method.isupper() or version not in ('HTTP/1.0', 'HTTP/1.1'):
        return None
    if not target.startswith('/'):
        return None
    return method, target.split('?', 1)[0]


class HealthServer:
    """The worker's HTTP endpoint for probes and metrics.

    Readiness is `mark_ready()` *or* the worker's own `is_running` (true once it has validated the
    namespace and started its pollers), and stops being true at `mark_stopping()` — call that
    before `worker.shutdown()` so the pod leaves the load balancer before it stops polling.
    """

    def __init__(
        self,
        port: int,
        *,
        host: str = '0.0.0.0',
        worker: PollingWorker | None = None,
        metrics: Callable[[], str] = render,
        read_timeout: float = 5.0,
        max_connections: int = 64,
    ) -> None:
        if not 0 <= port < 65536:
            raise ConfigurationError(
                f'Health port {port} is not a TCP port; set TEMPORAL_RECALL_HEALTH_PORT to 1-65535.'
            )
        self._host = host
        self._port = port
        self._worker = worker
        self._metrics = metrics
        self._read_timeout = read_timeout
        self._max_connections = max_connections
        self._ready = False
        self._stopping = False
        self._server: asyncio.Server | None = None
        self._connections: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self._overload_logged_at = -_OVERLOAD_LOG_INTERVAL

    @property
    def port(self) -> int:
        """The bound port; differs from the constructor's only when that was 0 (any free port)."""
        return self._port

    @property
    def ready(self) -> bool:
        if self._stopping:
            return False
        return self._ready or (self._worker is not None and self._worker.is_running)

    def mark_ready(self) -> None:
        """Report ready from now on (until `mark_stopping`)."""
        self._ready = True

    def mark_stopping(self) -> None:
        """Report not ready from now on: the worker is draining and should get no new work."""
        self._stopping = True

    async def start(self) -> None:
        if self._server is not None:
            raise RuntimeError('HealthServer.start() was called twice; start it once and stop it once.')
        try:
            self._server = await asyncio.start_server(
                self._accept, self._host, self._port, limit=MAX_HEAD_BYTES, reuse_address=True
            )
        except OSError as error:
            raise ConfigurationError(
                f'Cannot serve health checks on {self._host}:{self._port} ({error.strerror or error}); '
                'free that port or set TEMPORAL_RECALL_HEALTH_PORT to another one.'
            ) from error
        self._port = self._server.sockets[0].getsockname()[1]
        log.info('health endpoint listening', extra={'fields': {'port': self._port, 'routes': list(_ROUTES)}})

    async def stop(self) -> None:
        """Stop accepting, cut off any connection still open, and release the port."""
        self.mark_stopping()
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        # Closing a connection wakes its handler (a read sees EOF, a write fails) so it ends on its
        # own; cancelling is only the fallback for one that does not.
        for writer in self._connections.values():
            writer.close()
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=1)
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await server.wait_closed()

    async def __aenter__(self) -> HealthServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None  # start_server runs every callback in its own task
        self._connections[task] = writer
        try:
            if len(self._connections) > self._max_connections:
                self._log_overload()
                return
            await self._handle(reader, writer)
        except (ConnectionError, TimeoutError):
            pass  # the client went away or stopped reading; nothing to answer
        except asyncio.CancelledError:
            # Only stop() cancels a connection, and it has nothing left to report. Ending normally
            # also keeps Python 3.11's start_server from logging the cancellation as an error.
            pass
        except Exception:
            log.exception('health endpoint: unexpected error while answering a request')
        finally:
            self._connections.pop(task, None)
            writer.close()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                async with asyncio.timeout(1):
                    await writer.wait_closed()

    def _log_overload(self) -> None:
        """Warn at most once a minute: a flood of connections must not become a flood of log lines."""
        now = time.monotonic()
        if now - self._overload_logged_at >= _OVERLOAD_LOG_INTERVAL:
            self._overload_logged_at = now
            log.warning(
                f'health endpoint: more than {self._max_connections} open connections; dropping new ones. '
                'Something is holding connections open: check what scrapes or probes this port.'
            )

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(self._read_timeout):
                head = await reader.readuntil(b'\r\n\r\n')
        except TimeoutError:
            await self._send(writer, _response(HTTPStatus.REQUEST_TIMEOUT, 'request head not received in time\n'))
            await self._linger(reader, writer)
            return
        except asyncio.LimitOverrunError:
            body = f'request line and headers exceed {MAX_HEAD_BYTES} bytes\n'
            await self._send(writer, _response(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, body))
            await self._linger(reader, writer)
            return
        except asyncio.IncompleteReadError:
            return  # closed before finishing its request head
        status, body, content_type, headers = self._route(head)
        await self._send(writer, _response(status, body, content_type=content_type, headers=headers))
        if status >= HTTPStatus.BAD_REQUEST:
            await self._linger(reader, writer)

    def _route(self, head: bytes) -> tuple[HTTPStatus, str, str, tuple[str, ...]]:
        request = _parse_request_line(head)
        if request is None:
            return HTTPStatus.BAD_REQUEST, 'malformed HTTP/1.x request line\n', _TEXT, ()
        method, path = request
        if path not in _ROUTES:
            return HTTPStatus.NOT_FOUND, f'not found; this endpoint serves {", ".join(_ROUTES)}\n', _TEXT, ()
        if method != 'GET':
            return HTTPStatus.METHOD_NOT_ALLOWED, f'{method} is not allowed; use GET\n', _TEXT, ('Allow: GET',)
        if path == '/healthz':
            return HTTPStatus.OK, 'ok\n', _TEXT, ()
        if path == '/readyz':
            if self.ready:
                return HTTPStatus.OK, 'ready\n', _TEXT, ()
            reason = 'shutting down' if self._stopping else 'worker has not started polling yet'
            return HTTPStatus.SERVICE_UNAVAILABLE, f'not ready: {reason}\n', _TEXT, ()
        try:
            return HTTPStatus.OK, self._metrics(), CONTENT_TYPE, ()
        except Exception:
            log.exception('health endpoint: rendering metrics failed')
            return HTTPStatus.INTERNAL_SERVER_ERROR, 'rendering metrics failed; see the worker log\n', _TEXT, ()

    async def _send(self, writer: asyncio.StreamWriter, response: bytes) -> None:
        writer.write(response)
        async with asyncio.timeout(self._read_timeout):
            await writer.drain()

    async def _linger(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Half-close, then discard what the client still sends, briefly.

        Closing a socket with unread input makes the kernel send a reset, which can destroy the
        error response before the client reads it; draining a little first lets it arrive.
        """
        if writer.can_write_eof():
            writer.write_eof()
        discarded = 0
        with contextlib.suppress(TimeoutError, ConnectionError):
            async with asyncio.timeout(_LINGER_SECONDS):
                while discarded < _LINGER_BYTES:
                    chunk = await reader.read(4096)
                    if not chunk:
                        break
                    discarded += len(chunk)
