"""The tiers of long posting lists (`postings._tiers`, the top tier and the deeper one) are kept by every
write into the blocks, and `recall check` finds a tier that is not what its cut says: a pruned search
trusts both."""

from __future__ import annotations

import asyncio
import random

import numpy as np
import pytest

from temporal_recall.store.postings import _blocks, _tiers

from ._support import TIER_WORDS, AnyStore, Site, append_new, fill_tiered, rows_of, run_sql, settle_merges, user

pytestmark = pytest.mark.usefixtures('small_tiers')


async def _findings(store: AnyStore) -> list[str]:
    return [str(finding) for finding in (await store.check()).findings]


def test_the_frontier_keeps_only_pairs_no_other_dominates():
    frontier = _tiers.frontier_of(np.array([1, 2, 2, 3, 1, 5]), np.array([10, 30, 20, 40, 5, 90]))
    assert frontier.tolist() == [[5, 90], [3, 40], [2, 20], [1, 5]]
    again = _tiers.frontier_of(np.array([4]), np.array([20]), frontier)
    assert again.tolist() == [[5, 90], [4, 20], [1, 5]]


async def test_tiers_follow_merges_and_deletes_and_check_clean(recall_store: AnyStore):
    await fill_tiered(recall_store, range(120))
    tiered = await rows_of(recall_store, 'SELECT count(*) FROM term_tiers')
    assert tiered[0][0] > 0  # The common words got tiers,
    deeper = await rows_of(recall_store, 'SELECT count(*) FROM term_deep_tiers')
    assert 0 < deeper[0][0] < tiered[0][0]  # and the commonest deeper ones too.
    assert await _findings(recall_store) == []
    for number in range(0, 120, 7):
        record = await recall_store.read_record(f'c{number}')
        assert record is not None
        await recall_store.delete_record(f'c{number}', expected_revision=record.revision)
    assert await _findings(recall_store) == []
    await recall_store.reindex()
    assert await _findings(recall_store) == []


async def test_tiers_are_written_in_blocks_of_their_own_size(recall_store: AnyStore, monkeypatch: pytest.MonkeyPatch):
    """Tiers are only read whole, so their blocks hold up to `TIER_BLOCK` postings (3 here), where the blocks
    looked up by document hold up to `BLOCK` (2 here): as merges follow them, and as a reindex cuts them."""
    monkeypatch.setattr(_blocks, 'BLOCK', 2)
    sizes = 'SELECT max(count) FROM {}'
    await fill_tiered(recall_store, range(120))
    for _ in range(2):
        assert await rows_of(recall_store, sizes.format('posting_blocks')) == [(2,)]
        for level in _tiers.LEVELS:
            assert await rows_of(recall_store, sizes.format(level.postings)) == [(3,)]
        assert await _findings(recall_store) == []
        await recall_store.reindex()


async def test_writers_of_one_tenant_side_by_side_leave_tiers_that_check_clean(site: Site) -> None:
    """Four stores write conversations of one tenant at once, merging as they go (on PostgreSQL, in
    transactions that overlap): the tiers their merges follow, in blocks of three, still hold exactly the
    postings that reach each cut, and none is lost or kept twice."""
    stores = [await site.open() for _ in range(4)]
    try:

        async def write(store: AnyStore, first: int) -> None:
            rng = random.Random(first)
            for number in range(first, 160, 4):
                await append_new(store, number, [user(' '.join(rng.choices(TIER_WORDS, k=rng.randint(3, 30))))])

        await asyncio.gather(*(write(store, first) for first, store in enumerate(stores)))
        for store in stores:
            await settle_merges(store)
        assert (await rows_of(stores[0], 'SELECT count(*) FROM term_deep_tiers'))[0][0] > 0
        assert await _findings(stores[0]) == []
    finally:
        for store in stores:
            await store.close()


@pytest.mark.parametrize('level', [_tiers.TOP, _tiers.DEEP], ids=['top', 'deeper'])
async def test_a_reindex_cuts_each_long_list_once_at_its_end(recall_store: AnyStore, level: _tiers.Level):
    await fill_tiered(recall_store, range(120))
    long_lists = f'SELECT term_id FROM term_documents WHERE document_count >= {level.long} ORDER BY term_id'
    tiered = f'SELECT term_id FROM {level.states} ORDER BY term_id'
    before = await rows_of(recall_store, tiered)
    assert before
    assert before == await rows_of(recall_store, long_lists)
    await recall_store.reindex()
    assert await rows_of(recall_store, tiered) == before
    # Each tier was cut once, from its whole list, with the tenant's final average length.
    [(average,)] = await rows_of(recall_store, 'SELECT 1.0 * total_length / document_count FROM tenants')
    states = await rows_of(recall_store, f'SELECT tier_postings, cut_postings, reference_length FROM {level.states}')
    assert all(held == kept and length == pytest.approx(float(average)) for held, kept, length in states), states
    assert await _findings(recall_store) == []


@pytest.mark.parametrize('level', [_tiers.TOP, _tiers.DEEP], ids=['top', 'deeper'])
async def test_check_finds_a_tier_that_lost_a_posting_or_a_bound(recall_store: AnyStore, level: _tiers.Level):
    await fill_tiered(recall_store, range(120))
    name = 'deeper tier' if level.deep else 'tier'
    [(term_id, first_doc)] = await rows_of(
        recall_store,
        f'SELECT term_id, min(first_doc) FROM {level.postings} GROUP BY term_id ORDER BY term_id LIMIT 1',
    )
    await run_sql(
        recall_store, f'DELETE FROM {level.postings} WHERE term_id = $1 AND first_doc = $2', term_id, first_doc
    )
    findings = await _findings(recall_store)
    assert any(
        finding.startswith(f'index: {name} (') and f'term {term_id})' in finding and 'lacks' in finding
        for finding in findings
    ), findings
    await recall_store.reindex()
    assert await _findings(recall_store) == []
    await run_sql(recall_store, f'UPDATE {level.states} SET frontier = $1', b'')
    findings = await _findings(recall_store)
    assert any(name in finding and 'frontier does not bound' in finding for finding in findings), findings
