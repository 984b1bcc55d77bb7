"""The tiers a process's searches decoded (`index._tier_cache`) are used only while their version holds: every
write that changes a tier's postings gives it a new version (`postings._tiers.new_version`), in the same
transaction, so a search never ranks with postings a write has changed, on either backend."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from temporal_recall.models import SearchRequest
from temporal_recall.search.plan import search_index
from temporal_recall.store.index import _reader, _tier_cache
from temporal_recall.store.index._tier_cache import TierCache
from temporal_recall.store.postings import _segments, _tiers
from temporal_recall.store.postings._blocks import BLOCKS, joined_postings
from temporal_recall.store.protocol import PostingColumns

from ._support import (
    AnyStore,
    Site,
    append_new,
    back_to_version_19,
    fill_tiered,
    merge_everything,
    reference_search,
    rows_of,
    run_sql,
    settle_merges,
    user,
)

pytestmark = pytest.mark.usefixtures('small_tiers')


def _columns(*doc_ids: int) -> PostingColumns:
    ids = np.array(doc_ids, dtype=np.int64)
    return PostingColumns(ids, np.ones(len(ids), dtype=np.uint32), np.full(len(ids), 7, dtype=np.uint32))


def test_the_cache_answers_only_for_the_version_it_keeps():
    cache = TierCache(most_postings=10)
    cache.put(1, 5, False, 111, _columns(1, 2, 3))
    assert cache.get(1, 5, False, 111) is not None
    assert cache.get(1, 5, False, 112) is None  # Another version: read again.
    assert cache.get(1, 5, True, 111) is None  # Another level,
    assert cache.get(2, 5, False, 111) is None  # another tenant.
    cache.put(1, 5, False, 112, _columns(1, 2))  # The newer version replaces the older.
    assert cache.get(1, 5, False, 111) is None
    assert cache.postings == 2


def test_the_least_recently_used_tiers_go_first_and_kept_arrays_are_read_only():
    cache = TierCache(most_postings=6)
    cache.put(1, 1, False, 1, _columns(1, 2, 3))
    cache.put(1, 2, False, 1, _columns(4, 5))
    assert cache.get(1, 1, False, 1) is not None  # Used: now the most recent.
    cache.put(1, 3, False, 1, _columns(6, 7))  # Seven postings: the least recently used (term 2) goes.
    assert cache.get(1, 2, False, 1) is None
    assert cache.get(1, 1, False, 1) is not None and cache.get(1, 3, False, 1) is not None
    assert cache.postings == 5
    cache.put(1, 4, False, 1, _columns(*range(7)))  # Larger than the whole cache: not kept, nothing dropped.
    assert cache.get(1, 4, False, 1) is None and cache.postings == 5
    kept = cache.get(1, 1, False, 1)
    assert kept is not None
    with pytest.raises(ValueError, match='read-only'):
        kept.doc_ids[0] = 9
    with pytest.raises(ValueError, match='most_postings must not be negative'):
        TierCache(most_postings=-1)


def test_a_kept_tier_keeps_its_last_join_while_the_pending_postings_are_the_same():
    cache = TierCache(most_postings=20)
    assert cache.joined(1, 5, False, 111, _columns(4)) is None  # No tier kept: the caller joins.
    tier = _columns(2, 5, 9)
    cache.put(1, 5, False, 111, tier)
    assert cache.joined(1, 5, False, 112, _columns(4)) is None  # Another version.
    assert cache.joined(1, 5, False, 111, None) is cache.get(1, 5, False, 111)  # Nothing pending: the tier.
    assert cache.joined(1, 5, False, 111, _columns()) is cache.get(1, 5, False, 111)
    first = cache.joined(1, 5, False, 111, _columns(3, 12))
    assert first is not None and first.doc_ids.tolist() == [2, 3, 5, 9, 12]
    assert cache.postings == 3 + 5  # The join weighs beside its tier.
    with pytest.raises(ValueError, match='read-only'):
        first.doc_ids[0] = 9
    assert cache.joined(1, 5, False, 111, _columns(3, 12)) is first  # The same postings, read again: kept.
    changed = PostingColumns(*_columns(3, 12)[:2], np.array([7, 8], dtype=np.uint32))  # A length differs.
    second = cache.joined(1, 5, False, 111, changed)
    assert second is not None and second is not first
    assert [column.tolist() for column in second] == [column.tolist() for column in joined_postings(tier, changed)]
    assert cache.joined(1, 5, False, 111, _columns(3, 12)) is not first  # Only the last join is kept.
    cache.put(1, 5, False, 112, _columns(2, 5))  # A new version forgets the join with the old tier.
    assert cache.postings == 2
    joined = cache.joined(1, 5, False, 112, _columns(3, 12))
    assert joined is not None and joined.doc_ids.tolist() == [2, 3, 5, 12]
    cache.put(1, 6, False, 1, _columns(*range(20, 36)))  # Sixteen more: over the most, the least recent goes.
    assert cache.get(1, 5, False, 112) is None and cache.postings == 16


def test_pending_postings_join_a_kept_tier_once_each():
    tier = _columns(2, 5, 9)
    assert joined_postings(tier, None) is tier
    joined = joined_postings(tier, _columns(3, 5, 12))
    assert joined.doc_ids.tolist() == [2, 3, 5, 9, 12]
    assert len(joined.term_frequencies) == len(joined.lengths) == 5


async def _tiers_now(store: AnyStore) -> dict[tuple[str, int, int], tuple[int, bytes]]:
    """Every tier's version and postings, by `(level, tenant, term)`."""
    found: dict[tuple[str, int, int], tuple[int, bytes]] = {}
    for level in _tiers.LEVELS:
        versions = await rows_of(store, f'SELECT tenant_id, term_id, version FROM {level.states}')
        for tenant_id, term_id, version in versions:
            blocks = await rows_of(
                store,
                f'SELECT postings FROM {level.postings} WHERE tenant_id = {int(tenant_id)} '
                f'AND term_id = {int(term_id)} ORDER BY first_doc',
            )
            found[(level.states, int(tenant_id), int(term_id))] = (int(version), b''.join(bytes(b[0]) for b in blocks))
    return found


def _same_version_same_postings(before: Mapping[Any, tuple[int, bytes]], after: Mapping[Any, tuple[int, bytes]]) -> int:
    """Check that a tier whose version held kept its postings; how many tiers changed their postings."""
    changed = 0
    for key in before.keys() & after.keys():
        if before[key][1] != after[key][1]:
            changed += 1
            assert before[key][0] != after[key][0], f'{key} changed its postings but kept its version'
    return changed


async def _exact(store: AnyStore, queries: list[str]) -> None:
    for query in queries:
        request = SearchRequest(query=query, scope='tenant', all_conversations=True, limit=5)
        found = await search_index(store, request)
        expected = await reference_search(store, request)
        assert [(hit.entry_id, hit.score) for hit in found.hits] == [(hit.entry_id, hit.score) for hit in expected.hits]


QUERIES = ['order refund', 'late box order', 'refund', 'order refund late box', 'box w1']


async def test_every_write_that_changes_a_tier_gives_it_a_new_version(recall_store: AnyStore):
    """Merges that add to tiers, cuts, deletes and a reindex: a tier whose postings changed has a new version,
    and searches between them (each using the tiers kept by the last) answer as the exhaustive ranking."""
    await fill_tiered(recall_store, range(60))
    await _exact(recall_store, QUERIES)
    assert recall_store._tiers.postings > 0  # pyright: ignore[reportPrivateUsage]  (the searches kept tiers)
    changes = 0
    before = await _tiers_now(recall_store)
    await fill_tiered(recall_store, range(60, 120))  # Postings join tiers; grown tiers are cut again.
    after = await _tiers_now(recall_store)
    changes += _same_version_same_postings(before, after)
    await _exact(recall_store, QUERIES)
    for number in range(0, 120, 5):  # Deletes take postings out of tiers.
        record = await recall_store.read_record(f'c{number}')
        assert record is not None
        await recall_store.delete_record(f'c{number}', expected_revision=record.revision)
    await settle_merges(recall_store)
    await merge_everything(recall_store)
    before, after = after, await _tiers_now(recall_store)
    changes += _same_version_same_postings(before, after)
    await _exact(recall_store, QUERIES)
    await recall_store.reindex()
    before, after = after, await _tiers_now(recall_store)
    assert not {version for version, _ in before.values()} & {version for version, _ in after.values()}
    await _exact(recall_store, QUERIES)
    assert changes >= 5, changes  # Not vacuous: writes did change tiers.


async def test_a_store_written_before_tier_versions_searches_and_versions_its_tiers(site: Site):
    """A store of version 19 (tiers without versions) is upgraded: its tiers start at version 0, are kept,
    and the next write to one gives it a version of its own."""
    store = await site.open()
    try:
        await fill_tiered(store, range(60))
        await back_to_version_19(store)
    finally:
        await store.close()
    store = await site.open()
    try:
        versions = await rows_of(store, 'SELECT DISTINCT version FROM term_tiers')
        assert [tuple(row) for row in versions] == [(0,)]
        await _exact(store, QUERIES)
        await fill_tiered(store, range(60, 120))
        assert len(await rows_of(store, 'SELECT version FROM term_tiers WHERE version <> 0')) > 0
        await _exact(store, QUERIES)
    finally:
        await store.close()


@pytest.mark.postgres
async def test_a_kept_tier_changed_during_a_search_is_read_whole(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    """PostgreSQL reads without a snapshot: when a kept tier's version moves between the search's reads of
    it (a write committing meanwhile), the search reads that list whole instead and still ranks exactly."""
    if not type(site).__name__.startswith('Postgres'):
        pytest.skip('SQLite reads in a snapshot: nothing commits between its reads')
    store = await site.open()
    writer = await site.open()
    try:
        await fill_tiered(store, range(60))
        await _exact(store, ['order refund'])  # Keeps the tiers of both words.
        read_tiers, read_blocks = _reader.read_tiers, _reader.read_blocks
        whole: list[int] = []

        async def interleaved(*args: Any, **kwargs: Any) -> Any:
            found = await read_tiers(*args, **kwargs)
            await run_sql(writer, 'UPDATE term_tiers SET version = -version - 1')  # As a write committing now.
            return found

        async def counted(session: Any, tenant_id: int, term_ids: Any, table: Any = BLOCKS, **kwargs: Any) -> Any:
            if table == BLOCKS:
                whole.extend(term_ids)
            return await read_blocks(session, tenant_id, term_ids, table, **kwargs)

        monkeypatch.setattr(_reader, 'read_tiers', interleaved)
        monkeypatch.setattr(_reader, 'read_blocks', counted)
        await _exact(store, ['order refund'])
        assert len(set(whole)) >= 2, whole  # Both kept tiers moved: both lists read whole.
    finally:
        await writer.close()
        await store.close()


async def test_a_search_joins_a_kept_tier_with_its_pending_postings_once_while_they_stay_the_same(
    recall_store: AnyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes that stay pending change no tier's version: a search joins them to the kept tiers, the next
    search with the same pending postings reuses that join, and one after another write joins again. Every
    search answers as the exhaustive ranking."""
    await fill_tiered(recall_store, range(60))  # Every write merged: nothing pending.
    await _exact(recall_store, ['order refund'])  # Keeps both words' tiers.
    monkeypatch.setattr(_segments, 'MERGE_SEGMENTS', 1_000)  # The writes below stay pending.
    joins: list[int] = []

    def counted(base: PostingColumns, extra: PostingColumns | None) -> PostingColumns:
        joins.append(len(base.doc_ids))
        return joined_postings(base, extra)

    monkeypatch.setattr(_tier_cache, 'joined_postings', counted)
    for number, text in enumerate(['order refund order', 'refund refund order box'], start=60):
        versions = await _tiers_now(recall_store)
        await append_new(recall_store, number, [user(text)])
        await settle_merges(recall_store)
        assert await rows_of(recall_store, 'SELECT count(*) FROM pending_postings') != [(0,)]
        assert await _tiers_now(recall_store) == versions  # The tiers as they were: kept, and joined.
        before = len(joins)
        await _exact(recall_store, ['order refund'])
        assert len(joins) > before  # New pending postings: joined afresh.
        after = len(joins)
        await _exact(recall_store, ['order refund', 'refund order'])
        assert len(joins) == after  # The same pending postings: the kept joins.
