from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from temporal_recall.store import open_store

from .store._support import PostgresSite, postgres_url

pytest_plugins = ['temporal_recall.pytest_plugin']


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
