from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio

from temporal_recall.store import open_store


@pytest_asyncio.fixture
async def store(any_store_url: str) -> AsyncIterator[Any]:
    """A fresh store of each real backend, shared by the adapters and the agent's `ConversationRecall`."""
    opened = await open_store(any_store_url)
    try:
        yield opened
    finally:
        await opened.close()
