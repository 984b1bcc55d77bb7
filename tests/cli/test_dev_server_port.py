"""`recall dev-server` on a port that is taken exits at once, and never announces a server it does not run."""

from __future__ import annotations

import socket

from ._support import recall_async


async def test_a_taken_port_exits_non_zero_without_announcing_a_server() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(('127.0.0.1', 0))
        taken.listen()
        port = taken.getsockname()[1]

        ran = await recall_async('dev-server', '--port', str(port))

    assert ran.returncode == 2, str(ran)
    assert ran.stderr.startswith(f'error: Port {port} on 127.0.0.1 is taken'), str(ran)
    assert '--port' in ran.stderr
    assert 'Temporal dev server at' not in ran.stdout and 'Press Ctrl-C' not in ran.stdout, str(ran)
