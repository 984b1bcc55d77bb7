"""Migration 7: a store of the row-per-posting layout (version 6) upgrades to blocks and answers exactly as before."""

from __future__ import annotations

import logging

import pytest
from pydantic_ai.conversation import Conversation

from temporal_recall.models import SearchRequest
from temporal_recall.search._plan import search_history

from ._support import Site, back_to_version_6, column_of, problems_of, turn, user


async def _answers(store: object, requests: list[SearchRequest]) -> list[list[tuple[str, float]]]:
    return [[(hit.entry_id, hit.score) for hit in (await search_history(store, r)).hits] for r in requests]  # type: ignore[arg-type]


async def test_a_version_6_store_upgrades_to_blocks_with_the_same_answers(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    store = await site.open()
    try:
        for number in range(12):
            topic = ('weather', 'invoice', 'refund order')[number % 3]
            messages = [*turn(number, topic), user(f'order A-{1000 + number} for the {topic} team please')]
            conversation = Conversation(conversation_id=f'c{number}', messages=messages)
            await store.save(conversation, scope=('acme', 'globex')[number % 2])
        await store.delete('c5')
        requests = [
            SearchRequest(query=query, scope=scope, limit=limit, **target)  # type: ignore[arg-type]
            for query in ('order', 'invoice team', 'A-1004 order please', 'weather answer', 'absent')
            for scope in ('acme', 'globex')
            for limit in (1, 5)
            for target in ({'all_conversations': True}, {'conversation_id': 'c4' if scope == 'acme' else 'c3'})
        ]
        before = await _answers(store, requests)
        assert any(before)
        await back_to_version_6(store)
    finally:
        await store.close()
    with caplog.at_level(logging.INFO, logger='temporal_recall.store'):
        store = await site.open()
    try:
        assert any('migration 7 (postings in blocks): reindexing' in record.getMessage() for record in caplog.records)
        assert await _answers(store, requests) == before
        assert await problems_of(store) == []
        assert (await store.check()).clean
        assert max(await column_of(store, 'SELECT version FROM schema_migrations')) == 7
    finally:
        await store.close()
