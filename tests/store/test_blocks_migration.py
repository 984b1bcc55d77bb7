"""Migrations 7, 8 and 11: a store of the row-per-posting layout (version 6), of blocks without segments
(version 7), or of documents numbered as written (version 9), upgrades and answers exactly as before."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from pydantic_ai.conversation import Conversation

from temporal_recall.models import SearchRequest
from temporal_recall.search.plan import search_index
from temporal_recall.store.sql._migrations import latest_version

from ._support import (
    Site,
    back_to_version_6,
    back_to_version_7,
    back_to_version_10,
    column_of,
    problems_of,
    reopened_logging,
    turn,
    user,
)


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
        pending = (
            'SELECT count(*) FROM index_segments g JOIN tenants t ON t.tenant_id = g.tenant_id '
            "WHERE t.scope_key = 's:acme'"
        )
        segments = await column_of(store, pending)
        await store.save(Conversation(conversation_id='c20', messages=[user('order A-2000 please')]), scope='acme')
        assert await column_of(store, pending) == [segments[0] + 1]
        after = await search_index(store, SearchRequest(query='A-2000 order', scope='acme', all_conversations=True))
        assert [hit.conversation_id for hit in after.hits][:1] == ['c20']
        assert (await store.check()).clean
    finally:
        await store.close()


async def _aged(site: Site, back_to: Callable[[Any], Awaitable[None]], requests: list[SearchRequest]) -> list[Any]:
    """Fill the site's store, then turn it into an older version's (`back_to`); its answers before."""
    store = await site.open()
    try:
        await _fill(store)
        before = await _answers(store, requests)
        assert any(before)
        await back_to(store)
    finally:
        await store.close()
    return before


async def test_a_version_6_store_upgrades_to_blocks_with_the_same_answers(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    requests = _requests()
    before = await _aged(site, back_to_version_6, requests)
    store, progress = await reopened_logging(site, caplog)
    try:
        assert any(
            'migrations 7 (postings in blocks) and 9 (a document per speaker of a message) and 10 (' in line
            and ') and 11 (' in line
            for line in progress
        )
        assert await _answers(store, requests) == before
        assert await problems_of(store) == []
        assert (await store.check()).clean
        assert max(await column_of(store, 'SELECT version FROM schema_migrations')) == latest_version()
    finally:
        await store.close()


async def test_a_version_10_store_upgrades_to_derived_ids_and_segment_statistics_with_the_same_answers(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    """Migration 11 (writers side by side) renumbers documents by their creating entries and keeps the
    collection statistics in segments: a store of version 10 answers every search as before, with progress."""
    requests = _requests()
    before = await _aged(site, back_to_version_10, requests)
    store, progress = await reopened_logging(site, caplog)
    try:
        assert progress and all('11 (writers of one tenant side by side' in line for line in progress)
        assert progress[0].endswith(', 0 of 33 entries done.') and progress[-1].endswith(', 33 of 33 entries done.')
        assert max(await column_of(store, 'SELECT version FROM schema_migrations')) == latest_version()
        assert await _answers(store, requests) == before
        assert await problems_of(store) == []
        assert (await store.check()).clean
    finally:
        await store.close()
