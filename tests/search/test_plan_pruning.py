"""A scope-wide search that reads common terms in impact order answers exactly like a full read."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelRequest, UserPromptPart

from temporal_recall.models import SearchRequest
from temporal_recall.search import _plan
from temporal_recall.search._plan import search_history
from temporal_recall.store import AppendRequest, SqliteConversationStore

VOCABULARY = ['the', 'a', 'order', 'refund', 'paris', 'invoice', 'late', 'box', 'blue', 'x']


@pytest.mark.parametrize('first_read', [1, 32], ids=['deepening', 'first-read'])
@pytest.mark.parametrize('seed', range(6))
async def test_impact_ordered_search_equals_a_full_ranking(
    seed: int, first_read: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    rng = random.Random(seed)
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
            await store.append(
                AppendRequest(
                    conversation_id=f'c{number}',
                    scope='tenant',
                    idempotency_key=f'k{number}',
                    base_length=0,
                    base_hash=None,
                    messages=messages,
                )
            )
        queries = [' '.join(rng.sample(VOCABULARY, rng.randint(1, 3))) for _ in range(25)]
        for limit in (1, 3, 10):
            requests = [SearchRequest(query=q, scope='tenant', all_conversations=True, limit=limit) for q in queries]
            monkeypatch.setattr(_plan, 'LONG_POSTING_LIST', 10**9)
            full = [await search_history(store, request) for request in requests]
            monkeypatch.setattr(_plan, 'LONG_POSTING_LIST', 3)
            monkeypatch.setattr(_plan, 'FIRST_READ_PER_GROUP', first_read)
            pruned = [await search_history(store, request) for request in requests]
            for a, b in zip(full, pruned, strict=True):
                assert [(h.entry_id, h.score) for h in a.hits] == [(h.entry_id, h.score) for h in b.hits]
    finally:
        await store.close()
