"""pytest fixtures for a real Temporal dev server: add `pytest_plugins = ['temporal_recall.pytest_plugin']`.

`temporal_dev_server` starts one server per test session; `temporal_client` is a
client with pydantic-ai's plugin. Requires `pytest-asyncio` with a session-scoped event loop
(`asyncio_default_fixture_loop_scope = "session"`), since the server outlives single tests.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

import pytest_asyncio
from temporalio.client import Client

from .testing import DevServer, connect, dev_server

__all__ = ('temporal_client', 'temporal_dev_server')


@pytest_asyncio.fixture(scope='session', loop_scope='session')
async def temporal_dev_server() -> AsyncGenerator[DevServer]:
    async with dev_server() as server:
        yield server


@pytest_asyncio.fixture(scope='session', loop_scope='session')
async def temporal_client(temporal_dev_server: DevServer) -> Client:
    return await connect(temporal_dev_server)
