"""What a run left in the store, read back after its workers are gone."""

from __future__ import annotations

from pathlib import Path

from temporal_recall.content import content_hash
from temporal_recall.store import open_store


async def assert_stored_once(path: Path, conversation_id: str, expected: int) -> None:
    """The conversation holds exactly `expected` entries, none of them twice."""
    store = await open_store(path)
    try:
        entries = await store.load_entries(conversation_id)
    finally:
        await store.close()
    assert entries is not None and len(entries) == expected
    assert len({content_hash(e.message) for e in entries}) == expected
