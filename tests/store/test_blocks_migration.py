"""Migrations 7 and 8: a store of the row-per-posting layout (version 6), or of blocks without segments
(version 7), upgrades and answers exactly as before."""

from __future__ import annotations

import logging

import pytest
from pydantic_ai.conversation import Conversation

from temporal_recall.models import SearchRequest
from temporal_recall.search.plan import search_index
from temporal_recall.store.sql._migrations import latest_version

from ._support import Site, back_to_version_6, back_to_version_7, column_of, problems_of, turn, user


async def _answers(store: object, requests: list[SearchRequest]) -> list[list[tuple[str, float]]]:
    return [[(hit.entry_id, hit.score) for hit in (await search_index(store, r)).hits] for r in requests]  # type: ignore[arg-type]


def _requests() -> list[SearchRequest]:
    return [
        SearchRequest(query=query, scope=scope, limit=limit, **target)  # type: ignore[arg-type]
        for query in ('order', 'invoice team', 'A-1004 order please', 'weather answer', 'absent')
        for scope in ('acme', 'globex')
        for limit in (1, 5)
        for target in ({'all_conversations': True}, {'conversation_id': 'c4' if scope == 'acme' else 'c3'})
    ]


async def _fill(store: object) -> None:
    for number in range(12):
        topic = ('weather', 'invoice', 'refund order')[number % 3]
        messages = [*turn(number, topic), user(f'order A-{1000 + number} for the {topic} team please')]
        conversation = Conversation(conversation_id=f'c{number}', messages=messages)
        await store.save(conversation, scope=('acme', 'globex')[number % 2])  # type: ignore[attr-defined]
    await store.delete('c5')  # type: ignore[attr-defined]


async def test_a_version_7_store_upgrades_to_segments_with_the_same_answers(site: Site) -> None:
    store = await site.open()
    try:
        await _fill(store)
        before = await _answers(store, _requests())
        assert any(before)
        await back_to_version_7(store)
        assert await column_of(store, 'SELECT count(*) FROM posting_blocks') != [0]
    finally:
        await store.close()
    store = await site.open()
    try:
        assert max(await column_of(store, 'SELECT version FROM schema_migrations')) == latest_version()
        assert await _answers(store, _requests()) == before
        assert (await store.check()).clean
        pending = "SELECT pending_segments FROM tenants WHERE scope_key = 's:acme'"
        segments = await column_of(store, pending)
        await store.save(Conversation(conversation_id='c20', messages=[user('order A-2000 please')]), scope='acme')
        added = 1 if site.backend == 'sqlite' else 0  # `Dialect.prefer_segment_writes`
        assert await column_of(store, pending) == [segments[0] + added]
        after = await search_index(store, SearchRequest(query='A-2000 order', scope='acme', all_conversations=True))
        assert [hit.conversation_id for hit in after.hits][:1] == ['c20']
        assert (await store.check()).clean
    finally:
        await store.close()


async def test_a_version_6_store_upgrades_to_blocks_with_the_same_answers(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    store = await site.open()
    requests = _requests()
    try:
        await _fill(store)
        before = await _answers(store, requests)
        assert any(before)
        await back_to_version_6(store)
    finally:
        await store.close()
    with caplog.at_level(logging.INFO, logger='temporal_recall.store'):
        store = await site.open()
    try:
        assert any(
            'migrations 7 (postings in blocks) and 9 (a document per speaker of a message) and 10 ('
            in record.getMessage()
            for record in caplog.records
        )
        assert await _answers(store, requests) == before
        assert await problems_of(store) == []
        assert (await store.check()).clean
        assert max(await column_of(store, 'SELECT version FROM schema_migrations')) == latest_version()
    finally:
        await store.close()
