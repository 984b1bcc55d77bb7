"""A brand-new store is created quietly: nothing to reindex, so no migration progress is logged."""

from __future__ import annotations

import logging

import pytest

from temporal_recall.store import open_store


async def test_a_brand_new_store_logs_no_reindexing(any_store_url: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger='temporal_recall.store'):
        store = await open_store(any_store_url)
        await store.close()
    assert [r.getMessage() for r in caplog.records if 'reindexing' in r.getMessage()] == []
