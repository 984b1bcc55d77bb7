"""A scope-wide search over the top tiers of long posting lists (`search._pruned`) answers exactly like the
exhaustive ranking: the same hits in the same order with the same scores, ties included, on random
stores and queries, through merges, deletes and reindexes, on both backends."""

from __future__ import annotations

import asyncio
import random
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from temporal_recall.models import SearchRequest
from temporal_recall.search import _contenders, _pruned
from temporal_recall.search.plan import search_index
from temporal_recall.store.index import _reader
from temporal_recall.store.postings import _blocks, _tiers
from temporal_recall.store.protocol import TieredPostings

from ..store._support import AnyStore, append_new, open_site, reference_search, rows_of, settle_merges

BACKENDS = [pytest.param('sqlite'), pytest.param('postgres', marks=pytest.mark.postgres)]

VOCABULARY = ['the', 'order', 'refund', 'paris', 'invoice', 'late', 'box', 'blue', 'x', 'zebra']
"""Drawn with falling weights: the first words are in most documents (long lists, tiered), the last in few."""


@pytest.fixture(autouse=True)
def _no_leaked_tiers() -> Iterator[None]:
    sizes = (_tiers.TIER, _tiers.LONG, _tiers.DEEP_TIER, _tiers.DEEP_LONG, _reader.DEEP_AT_ONCE)
    yield
    now = (_tiers.TIER, _tiers.LONG, _tiers.DEEP_TIER, _tiers.DEEP_LONG, _reader.DEEP_AT_ONCE)
    assert sizes == now, 'a test left its tier sizes behind'


def _text(rng: random.Random, width: int) -> str:
    weights = [1 / (rank + 1) for rank in range(len(VOCABULARY))]
    return ' '.join(rng.choices(VOCABULARY[:width], weights=weights[:width], k=rng.randint(1, 7)))


def _messages(rng: random.Random) -> list[ModelMessage]:
    messages: list[ModelMessage] = []
    for turn in range(rng.randint(1, 5)):  # A prompt, its answer, the next prompt: as a conversation goes.
        text = _text(rng, rng.randint(2, len(VOCABULARY)))
        if turn % 2 == 0:
            messages.append(ModelRequest(parts=[UserPromptPart(text)]))
        else:
            messages.append(ModelResponse(parts=[TextPart(text)]))
    return messages


async def _fill(store: AnyStore, rng: random.Random, conversations: range, vocabulary: int = 0) -> None:
    """Conversations of random texts; with `vocabulary`, one message of 20-200 words of that many (Zipf)."""
    for number in conversations:
        messages = _messages(rng)
        if vocabulary:
            weights = [1 / (rank + 1) for rank in range(vocabulary)]
            words = [f'w{rank}' for rank in range(vocabulary)]
            messages = [
                ModelRequest(parts=[UserPromptPart(' '.join(rng.choices(words, weights, k=rng.randint(20, 200))))])
            ]
        await append_new(store, number, messages)


async def _same_answers(store: AnyStore, rng: random.Random, queries: int, words: Sequence[str] = VOCABULARY) -> None:
    """Every query, at several page sizes and BM25 parameters, ranked pruned and exhaustively."""
    for _ in range(queries):
        query = ' '.join(rng.sample(words, rng.randint(1, 4)))
        k1, b = rng.choice([(1.5, 0.75), (0.0, 0.5), (3.0, 0.0), (1.2, 1.0)])
        for limit in (1, 3, 10):
            request = SearchRequest(query=query, scope='tenant', all_conversations=True, limit=limit, k1=k1, b=b)
            expected = await reference_search(store, request)
            found = await search_index(store, request)
            assert [(hit.entry_id, hit.score) for hit in found.hits] == [
                (hit.entry_id, hit.score) for hit in expected.hits
            ], f'{request!r}'
            assert found.searched_documents == expected.searched_documents


async def _check_clean(store: AnyStore) -> None:
    await settle_merges(store)
    report = await store.check()
    assert report.clean, '\n'.join(map(str, report.findings))


async def _scenario(backend: str, seed: int, tier: int, wholes: int, deep: int, at_once: int, choose: int) -> None:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as patched:
        if choose:  # Only the contenders are bounded, whatever the lists' size, from a first choice of `choose`.
            patched.setattr(_pruned, 'CHOOSE_FROM', 0)
            patched.setattr(_contenders, '_FIRST', choose)
            patched.setattr(_contenders, '_RANKS', tuple(2**power for power in range(12)))
            patched.setattr(_contenders, 'MOST_KEPT', 1.0)
        else:
            patched.setattr(_pruned, 'CHOOSE_FROM', 2**62)
        patched.setattr(_pruned, 'MOST_WHOLE', wholes)  # Whole lists read on the way, or every posting at once.
        patched.setattr(_reader, 'DEEP_AT_ONCE', at_once)  # Deeper tiers read first, or only when in doubt.
        patched.setattr(_tiers, 'TIER', tier)
        patched.setattr(_tiers, 'LONG', 4 * tier)
        patched.setattr(_blocks, 'TIER_BLOCK', max(2, tier // 3))  # Each tier in several blocks.
        if deep:  # Deeper tiers `deep` times as deep, on lists twice as long as they hold; else none this small.
            patched.setattr(_tiers, 'DEEP_TIER', deep * tier)
            patched.setattr(_tiers, 'DEEP_LONG', 2 * deep * tier)
        async with open_site(backend, Path(folder)) as site:
            store = await site.open()
            try:
                await _fill(store, rng, range(25))
                await _same_answers(store, rng, 6)
                await _fill(store, rng, range(25, 50))  # Tiers grow, and are cut again.
                await _check_clean(store)
                await _same_answers(store, rng, 6)
                for number in rng.sample(range(50), 8):  # Deletes take postings out of tiers.
                    record = await store.read_record(f'c{number}')
                    assert record is not None
                    await store.delete_record(f'c{number}', expected_revision=record.revision)
                await _check_clean(store)
                await _same_answers(store, rng, 6)
                await store.reindex()  # The bulk path builds the tiers afresh.
                await _check_clean(store)
                await _same_answers(store, rng, 6)
            finally:
                await store.close()


@pytest.mark.parametrize('backend', BACKENDS)
@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    tier=st.sampled_from([1, 2, 4, 8]),
    wholes=st.sampled_from([0, 1, 3]),
    deep=st.sampled_from([0, 2, 3]),
    at_once=st.sampled_from([1, 2, _reader.DEEP_AT_ONCE]),
    choose=st.sampled_from([0, 1, 16]),
)
def test_pruned_ranking_equals_the_exhaustive_one(
    backend: str, seed: int, tier: int, wholes: int, deep: int, at_once: int, choose: int
):
    asyncio.run(_scenario(backend, seed, tier, wholes, deep, at_once, choose))


def _search_a_large_store(path: Path, *, seed: int, queries: int, words: int, deep: bool = False) -> None:
    """1,500 messages of 20-200 words of a 2,000-word Zipf vocabulary, checked clean (with deeper tiers, with
    `deep`), then `queries` queries of its `words` commonest words answered alike pruned and exhaustively."""

    async def scenario() -> None:
        rng = random.Random(seed)
        async with open_site('sqlite', path) as site:
            store = await site.open()
            try:
                await _fill(store, rng, range(1500), vocabulary=2000)
                await _check_clean(store)
                if deep:
                    assert (await rows_of(store, 'SELECT count(*) FROM term_deep_tiers'))[0][0] > 0
                await _same_answers(store, rng, queries, [f'w{rank}' for rank in range(words)])
            finally:
                await store.close()

    asyncio.run(scenario())


def test_the_tiers_prune_rather_than_read_everything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Not vacuous: with tiers much shorter than their lists, most searches of common words are proven
    from the tiers and a few lookups, reading a fraction of the postings."""
    monkeypatch.setattr(_tiers, 'TIER', 256)
    monkeypatch.setattr(_tiers, 'LONG', 1024)
    proven: list[tuple[int, int]] = []
    declined: list[tuple[int, int]] = []
    lookups = _pruned.TierPruning.lookups

    def counted(self: _pruned.TierPruning, read: TieredPostings) -> Mapping[str, NDArray[np.int64]] | None:
        asked = lookups(self, read)
        if read.frontiers and not asked:  # The search's last round: its page proven, or every posting read.
            held = sum(len(c.doc_ids) for c in (*read.known.values(), *read.looked_up.values()))
            (declined if asked is None else proven).append((held, sum(read.frequencies.values())))
        return asked

    monkeypatch.setattr(_pruned.TierPruning, 'lookups', counted)

    _search_a_large_store(tmp_path, seed=5, queries=20, words=12)
    assert len(proven) > 2 * len(declined), (len(proven), len(declined))
    assert sum(read for read, _ in proven) * 4 < sum(total for _, total in proven) * 3, proven


def test_a_deeper_tier_proves_pages_the_top_tiers_leave_in_doubt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Not vacuous either: where the top tiers leave a page in doubt, searches read the deeper tiers and are
    proven from them (no list read whole, not every posting), and still answer exactly."""
    monkeypatch.setattr(_tiers, 'TIER', 32)
    monkeypatch.setattr(_tiers, 'LONG', 128)
    monkeypatch.setattr(_tiers, 'DEEP_TIER', 256)
    monkeypatch.setattr(_tiers, 'DEEP_LONG', 512)
    rounds: list[tuple[bool, bool]] = []  # Per search: whether it read a deeper tier, whether it was proven.
    lookups = _pruned.TierPruning.lookups

    def counted(self: _pruned.TierPruning, read: TieredPostings) -> Mapping[str, NDArray[np.int64] | None] | None:
        asked = lookups(self, read)
        if asked is not None and any(doc_ids is None for doc_ids in asked.values()):
            assert {term for term, doc_ids in asked.items() if doc_ids is None} <= read.deeper  # No whole list.
            self.__dict__['deepened'] = True
        if read.frontiers and not asked:
            rounds.append((self.__dict__.get('deepened', False), asked is not None))
        return asked

    monkeypatch.setattr(_pruned.TierPruning, 'lookups', counted)

    _search_a_large_store(tmp_path, seed=11, queries=30, words=8, deep=True)
    proven_deeper = sum(1 for deepened, proven in rounds if deepened and proven)
    assert proven_deeper >= 5, rounds


def test_many_common_words_read_the_deeper_tiers_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A query of `DEEP_AT_ONCE` tiered terms or more starts from the deeper tiers of the lists that keep one
    (their top tiers never read), is proven from there and answers exactly."""
    monkeypatch.setattr(_tiers, 'TIER', 32)
    monkeypatch.setattr(_tiers, 'LONG', 128)
    monkeypatch.setattr(_tiers, 'DEEP_TIER', 256)
    monkeypatch.setattr(_tiers, 'DEEP_LONG', 512)
    monkeypatch.setattr(_reader, 'DEEP_AT_ONCE', 2)
    first_reads: list[tuple[bool, bool]] = []  # Per search: whether it started deep, whether it was proven.
    levels: list[bool] = []  # The levels of tiers read since the last search started (deep or not).
    read_level = _reader._read_level  # pyright: ignore[reportPrivateUsage]

    async def recorded(session: Any, tenant_id: int, before: Mapping[int, Any], level: _tiers.Level, cache: Any) -> Any:
        if before:
            levels.append(level.deep)
        return await read_level(session, tenant_id, before, level, cache)

    lookups = _pruned.TierPruning.lookups

    def counted(self: _pruned.TierPruning, read: TieredPostings) -> Mapping[str, NDArray[np.int64] | None] | None:
        if 'deep' not in self.__dict__:  # The search's first round: what was read before any was asked for.
            self.__dict__['deep'] = started_deep = any(levels)
            assert not (started_deep and read.deeper), 'once deeper tiers are read at once, none is left to read'
            assert len(read.frontiers) >= 2 or not started_deep, 'one tiered term starts from its top tier'
        levels.clear()
        asked = lookups(self, read)
        if read.frontiers and not asked:
            first_reads.append((self.__dict__['deep'], asked is not None))
        return asked

    monkeypatch.setattr(_reader, '_read_level', recorded)
    monkeypatch.setattr(_pruned.TierPruning, 'lookups', counted)

    _search_a_large_store(tmp_path, seed=11, queries=30, words=8, deep=True)
    assert sum(1 for deep, proven in first_reads if deep and proven) >= 5, first_reads


@settings(max_examples=200, deadline=None)
@given(
    postings=st.lists(st.tuples(st.integers(1, 12), st.integers(1, 400)), min_size=1, max_size=40),
    asked=st.lists(st.integers(0, 450), min_size=1, max_size=30),
    k1=st.sampled_from([0.0, 0.5, 1.2, 2.0]),
    b=st.sampled_from([0.0, 0.4, 0.75, 1.0]),
)
def test_a_cap_bounds_every_posting_below_the_cut_of_a_document_of_its_length(
    postings: list[tuple[int, int]], asked: list[int], k1: float, b: float
) -> None:
    """`_caps` against every frontier pair: at a document's length, no posting the frontier bounds weighs
    more than the cap, the cap is the best fitting pair's weight, at most the rest, and 0 where no pair is
    as short (the rest where the length is unknown)."""
    frequencies = np.array([tf for tf, _ in postings], dtype=np.uint32)
    lengths = np.array([length for _, length in postings], dtype=np.uint32)
    frontier = _tiers.frontier_of(frequencies, lengths)
    idf, average = 1.7, 120.0
    rest = float(_pruned.array_weights(frontier[:, 0], frontier[:, 1], idf, k1, b, average).max())
    documents = np.array(asked, dtype=np.uint32)
    caps = _pruned._caps(frontier, documents, idf, k1, b, average, rest)  # pyright: ignore[reportPrivateUsage]
    for length, cap in zip(documents.tolist(), caps.tolist(), strict=True):
        if length == 0:
            assert cap == rest
            continue
        fitting = [tf for tf, shortest in frontier.tolist() if shortest <= length]
        best = (
            float(_pruned.array_weights(np.array([max(fitting)]), np.array([length]), idf, k1, b, average)[0])
            if fitting
            else 0.0
        )
        assert cap == min(best, rest)
        held = [tf for tf, at in postings if at == length]
        if held:
            weights = _pruned.array_weights(np.array(held), np.full(len(held), length), idf, k1, b, average)
            assert float(weights.max()) <= cap
