"""Migration 9: a store that filed a whole request under one role (version 8) is reindexed into a
document per speaker when it is opened, with its progress logged; a new store logs no progress."""

from __future__ import annotations

import logging

import pytest
from pydantic_ai import messages as m

from temporal_recall.query import search_messages
from temporal_recall.search import message_role, searchable_text, term_frequencies
from temporal_recall.store.index import _documents, _terms
from temporal_recall.store.index._terms import IndexTerms
from temporal_recall.store.sql._migrations import latest_version

from ._support import (
    PROMPT,
    SYSTEM_PROMPT,
    AnyStore,
    Site,
    back_to_version_8,
    column_of,
    reopened_logging,
    run_briefed_agent,
)


def _whole_message(message: m.ModelMessage) -> tuple[IndexTerms, ...]:
    """How version 8 indexed a message: one document of all its words, under the role of the whole message."""
    frequencies, length = term_frequencies(searchable_text(message))
    return (IndexTerms(frequencies=frequencies, length=length, role=message_role(message)),) if length else ()


async def _roles(store: AnyStore, query: str, role: str) -> list[tuple[int, str, str]]:
    result = await search_messages(store, query, conversation_id='briefed', scope=None, role=role)  # type: ignore[arg-type]
    return [(hit.position, hit.role, hit.excerpt) for hit in result.hits]


async def test_a_version_8_store_is_reindexed_into_a_document_per_speaker(
    site: Site, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = await site.open()
    try:
        with monkeypatch.context() as old_writer:
            old_writer.setattr(_terms, 'index_documents', _whole_message)
            old_writer.setattr(_documents, 'index_documents', _whole_message)
            await run_briefed_agent(store)
        # What version 8 answered: the system prompt's words filed under the user.
        assert await _roles(store, 'courier desk', 'system') == []
        assert [hit[:2] for hit in await _roles(store, 'courier desk', 'user')] == [(0, 'user')]
        await back_to_version_8(store)
    finally:
        await store.close()
    store, progress = await reopened_logging(site, caplog)
    try:
        assert progress, 'the upgrade reports its progress'
        assert all(
            'migrations 9 (a document per speaker of a message) and 10 (' in line and ') and 11 (' in line
            for line in progress
        )
        assert progress[0].endswith('reindexing, 0 of 2 entries done.')
        assert progress[-1].endswith('reindexing, 2 of 2 entries done.')
        assert max(await column_of(store, 'SELECT version FROM schema_migrations')) == latest_version() >= 9
        assert await _roles(store, 'courier desk', 'system') == [(0, 'system', SYSTEM_PROMPT)]
        assert await _roles(store, 'courier desk', 'user') == []
        assert await _roles(store, 'where now', 'user') == [(0, 'user', PROMPT)]
        assert await _roles(store, 'where now', 'system') == []
        report = await store.check()
        assert report.clean, report.findings
    finally:
        await store.close()


async def test_a_new_store_logs_no_reindexing(site: Site, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger='temporal_recall.store'):
        store = await site.open()
    try:
        assert [record.getMessage() for record in caplog.records if 'reindexing' in record.getMessage()] == []
        assert max(await column_of(store, 'SELECT version FROM schema_migrations')) == latest_version()
        assert await column_of(store, "SELECT value FROM index_settings WHERE name = 'analyzer'") != []
    finally:
        await store.close()
