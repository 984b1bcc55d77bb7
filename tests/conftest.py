from __future__ import annotations

import os
from collections.abc import AsyncIterator, Generator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, settings

from temporal_recall.store import open_store

from .store import _support as postgres_support
from .store._support import PostgresSite, postgres_server, postgres_url

pytest_plugins = ['temporal_recall.pytest_plugin']

# Every property test runs under this profile, so none depends on the machine's speed: Hypothesis's
# per-example deadline and its slow-generation health check are both wall-clock bounds, and this
# machine is shared. Tests set only what is their own (how many examples, which fixtures they reuse).
settings.register_profile('recall', deadline=None, suppress_health_check=[HealthCheck.too_slow])
# CI runs the same examples every time (seeded from each test), so a failure there reproduces.
settings.register_profile('recall-ci', settings.get_profile('recall'), derandomize=True, print_blob=True)
settings.load_profile('recall-ci' if os.environ.get('CI') == 'true' else 'recall')


@pytest.fixture(params=['sqlite', pytest.param('postgres', marks=pytest.mark.postgres)])
async def any_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """Where a fresh, empty store of each real backend lives: a SQLite file path, then a PostgreSQL URL
    naming a schema of its own (dropped afterwards). Nothing is opened: the code under test opens it."""
    if request.param == 'sqlite':
        yield str(tmp_path / 'recall.db')
        return
    site = PostgresSite(postgres_url())
    try:
        yield site.url
    finally:
        await site.close()


@pytest_asyncio.fixture
async def any_store(any_store_url: str) -> AsyncIterator[Any]:
    """A fresh store of each real backend, opened on `any_store_url` and closed afterwards."""
    opened = await open_store(any_store_url)
    try:
        yield opened
    finally:
        await opened.close()


# PostgreSQL: the tests that need it run on the configured or a local server (`postgres_server`); without
# one, each skips in `postgres_url`, and the run ends with one line saying how many and why.


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that runs against PostgreSQL `postgres`, however it picked the backend."""
    for item in items:
        callspec = getattr(item, 'callspec', None)
        if callspec is not None and 'postgres' in callspec.params.values():
            item.add_marker(pytest.mark.postgres)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Report a skip for want of PostgreSQL at `postgres_url`, not at its test, so `-ra` folds them all."""
    report = yield
    server = postgres_server() if report.skipped and call.excinfo is not None else None
    if server is not None and server.url is None and getattr(call.excinfo.value, 'msg', None) == server.missing:
        report.longrepr = (postgres_support.__file__, None, server.missing)
    return report
