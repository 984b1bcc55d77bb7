from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from temporal_recall.store import open_store


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return str(tmp_path / 'recall.db')


@pytest_asyncio.fixture
async def read_store(store_url: str) -> AsyncIterator[object]:
    """A second connection to the test's store, for assertions after the worker wrote."""
    store = await open_store(store_url)
    try:
        yield store
    finally:
        await store.close()
