"""A search that scores posting lists as arrays (scope-wide over common terms, or in a conversation or run)
answers exactly like the row-by-row ranking."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from temporal_recall.models import SearchRequest
from temporal_recall.search._bm25_arrays import rank_columns
from temporal_recall.search.plan import search_index, target_frequencies
from temporal_recall.store import AppendRequest, SearchTarget, SqliteConversationStore, open_store
from temporal_recall.store.postings import _blocks

from ..store._support import append_new, postings_of, reference_search

VOCABULARY = ['the', 'a', 'order', 'refund', 'paris', 'invoice', 'late', 'box', 'blue', 'x']


@pytest.mark.parametrize('block', [1, 3, 128], ids=['blocks-of-1', 'blocks-of-3', 'blocks-of-128'])
@pytest.mark.parametrize('seed', range(4))
async def test_array_ranking_equals_the_row_ranking(
    seed: int, block: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Many block boundaries (blocks of 1 and 3 postings, appended to across writes) and one block per term."""
    rng = random.Random(seed)
    monkeypatch.setattr(_blocks, 'BLOCK', block)
    store = await SqliteConversationStore.open(tmp_path / 'pruning.db')
    try:
        for number in range(60):
            # Few words and short texts: many documents tie exactly, the hard case for early stopping.
            messages = [
                ModelRequest(
                    parts=[UserPromptPart(' '.join(rng.choices(VOCABULARY[: rng.randint(2, 10)], k=rng.randint(1, 6))))]
                )
                for _ in range(rng.randint(1, 6))
            ]
            await append_new(store, number, messages)
        queries = [' '.join(rng.sample(VOCABULARY, rng.randint(1, 3))) for _ in range(25)]
        for limit in (1, 3, 10):
            requests = [SearchRequest(query=q, scope='tenant', all_conversations=True, limit=limit) for q in queries]
            full = [await reference_search(store, request) for request in requests]
            pruned = [await search_index(store, request) for request in requests]
            for a, b in zip(full, pruned, strict=True):
                assert [(h.entry_id, h.score) for h in a.hits] == [(h.entry_id, h.score) for h in b.hits]
    finally:
        await store.close()


async def test_long_posting_lists_with_ties_rank_exactly_on_both_backends(
    any_store_url: str, monkeypatch: pytest.MonkeyPatch
):
    """At the real block size: common terms in thousands of documents (dozens of blocks each), lengths
    from a handful of values so scores tie in long runs, and a rare term among common ones."""
    rng = random.Random(18)
    common = ['order', 'refund', 'invoice']
    filler = ['box', 'blue', 'late', 'paris']
    store = await open_store(any_store_url)
    try:
        for number in range(6):
            texts = []
            for index in range(500):
                words = [w for w in common for _ in range(rng.choice((0, 1, 1, 2, 3)))]
                words += rng.choices(filler, k=rng.choice((1, 4, 9)))
                if (number * 500 + index) % 997 == 0:
                    words.append('a1042')
                rng.shuffle(words)
                texts.append(' '.join(words) or 'box')
            await append_new(store, number, [ModelRequest(parts=[UserPromptPart(text)]) for text in texts])
        frequencies = await store.document_frequencies(SearchTarget(scope='tenant', conversation_id=None), common)
        assert frequencies is not None
        assert min(frequencies.values()) > 30 * _blocks.BLOCK  # dozens of blocks per common term
        queries = ['order', 'order refund', 'refund invoice order', 'a1042 order refund', 'a1042 invoice', 'blue order']
        calls: Counter[str] = Counter()

        def counted(name: str) -> Any:
            read = getattr(store, name)

            async def call(*args: Any, **kwargs: Any) -> Any:
                calls[name] += 1
                return await read(*args, **kwargs)

            return call

        for limit in (1, 10, 50):
            requests = [SearchRequest(query=q, scope='tenant', all_conversations=True, limit=limit) for q in queries]
            with monkeypatch.context() as patched:
                for name in ('index_stats', 'target_postings', 'tiered_postings', 'document_frequencies', 'documents'):
                    patched.setattr(store, name, counted(name))
                pruned = [await search_index(store, request) for request in requests]
            full = [await reference_search(store, request) for request in requests]
            for query, a, b in zip(queries, full, pruned, strict=True):
                assert len(a.hits) == limit, query
                assert [(h.entry_id, h.score) for h in a.hits] == [(h.entry_id, h.score) for h in b.hits], query
        # Two store calls per search: the stats with the posting lists (the tiers', scope-wide), then the
        # page's documents.
        assert calls == {'tiered_postings': 3 * len(queries), 'documents': 3 * len(queries)}
    finally:
        await store.close()


@pytest.mark.parametrize('block', [3, 128], ids=['blocks-of-3', 'blocks-of-128'])
async def test_a_narrowed_search_scored_as_arrays_ranks_like_the_rows(
    block: int, any_store_url: str, monkeypatch: pytest.MonkeyPatch
):
    """A conversation's, a run's or a role's search scores its postings as arrays: the same documents,
    the same scores bit for bit and the same tie order as `rank` over the same target's posting tuples."""
    from dataclasses import replace

    from temporal_recall.content import content_hash
    from temporal_recall.search._bm25 import DEFAULT_PARAMETERS, rank

    monkeypatch.setattr(_blocks, 'BLOCK', block)
    rng = random.Random(block)
    store = await open_store(any_store_url)
    try:
        for number in range(3):
            last: ModelMessage | None = None
            for run in range(2):  # Two appends per conversation, each its own run.
                texts = [
                    ' '.join(rng.choices(VOCABULARY[: rng.randint(3, 10)], k=rng.randint(1, 5))) for _ in range(60)
                ]
                messages: list[ModelMessage] = [
                    ModelRequest(parts=[UserPromptPart(text)]) if n % 3 else ModelResponse(parts=[TextPart(text)])
                    for n, text in enumerate(texts)
                ]
                await store.append(
                    AppendRequest(
                        conversation_id=f'c{number}',
                        scope='tenant',
                        idempotency_key=f'k{number}/{run}',
                        base_length=60 * run,
                        base_hash=None if last is None else content_hash(last),
                        messages=messages,
                        run_id=f'c{number}-run{run}',
                    )
                )
                last = messages[-1]
        targets = [SearchTarget(scope='tenant', conversation_id=f'c{n}') for n in range(3)] + [
            SearchTarget(scope='tenant', conversation_id='c1', run_id='c1-run1'),
            SearchTarget(scope='tenant', conversation_id=None, run_id='c2-run0'),
            SearchTarget(scope='tenant', conversation_id='c0', role='user'),
            SearchTarget(scope='tenant', conversation_id=None, role='assistant'),
        ]
        queries = [rng.sample(VOCABULARY, rng.randint(1, 4)) for _ in range(15)]
        compared = 0
        for target in targets:
            stats = await store.index_stats(target)
            assert stats is not None and stats.document_count > 0
            for terms in queries:
                for limit in (1, 10, 50):
                    found = await store.target_postings(target, terms)
                    assert found is not None and found.stats == stats
                    frequencies, _ = await target_frequencies(store, target, found.columns, terms)
                    ranked = rank_columns(stats, found.columns, frequencies, terms, DEFAULT_PARAMETERS, limit)
                    unfiltered = None
                    if target.role is not None:  # A role's hits rank with the idf of the whole target.
                        whole = await postings_of(store, replace(target, role=None), terms)
                        unfiltered = {term: len(found) for term, found in whole.items()}
                    postings = await postings_of(store, target, terms)
                    expected = rank(stats, postings, terms, limit=limit, document_frequencies=unfiltered)
                    assert [(s.doc_id, s.score) for s in ranked] == [(s.doc_id, s.score) for s in expected], (
                        target,
                        terms,
                    )
                    compared += bool(expected)
        assert compared > 100
    finally:
        await store.close()
