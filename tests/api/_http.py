"""A real HTTP server on loopback for the API tests, and a small blocking client for it.

The server is uvicorn in a thread with its own event loop, so tests (and schemathesis, which is
synchronous) can make blocking requests without stalling the loop that serves them.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import uvicorn


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(('127.0.0.1', 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class Client:
    host: str
    port: int

    @property
    def base_url(self) -> str:
        return f'http://{self.host}:{self.port}'

    def request(
        self,
        method: str,
        path: str,
        *,
        token: str | None = None,
        json_body: Any = None,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        chunked: bool = False,
    ) -> Response:
        sent = dict(headers or {})
        if token is not None:
            sent['Authorization'] = f'Bearer {token}'
        if json_body is not None:
            body = json.dumps(json_body).encode()
            sent.setdefault('Content-Type', 'application/json')
        connection = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            if chunked:
                sent['Transfer-Encoding'] = 'chunked'
                connection.putrequest(method, path)
                for name, value in sent.items():
                    connection.putheader(name, value)
                connection.endheaders()
                data = body or b''
                try:
                    for start in range(0, len(data), 8192):
                        piece = data[start : start + 8192]
                        connection.send(f'{len(piece):x}\r\n'.encode() + piece + b'\r\n')
                    connection.send(b'0\r\n\r\n')
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the server answered early (413) and closed; read that answer
            else:
                connection.request(method, path, body=body, headers=sent)
            answer = connection.getresponse()
            return Response(answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read())
        finally:
            connection.close()

    def get(self, path: str, **options: Any) -> Response:
        return self.request('GET', path, **options)

    def post(self, path: str, **options: Any) -> Response:
        return self.request('POST', path, **options)


@contextlib.contextmanager
def serving(app: Any, port: int | None = None) -> Iterator[Client]:
    """Run `app` on loopback (on `port`, or a free one) until the block exits (lifespan included)."""
    port = port or free_port()
    config = uvicorn.Config(app, host='127.0.0.1', port=port, log_level='warning', lifespan='on')
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f'uvicorn-{port}', daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError('uvicorn did not start')
        time.sleep(0.02)
    try:
        yield Client('127.0.0.1', port)
    finally:
        server.should_exit = True
        thread.join(timeout=20)
