"""Numbered migrations: recorded, applied to older databases in one transaction, refused when too new."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest
from pydantic_ai.conversation import Conversation

from temporal_recall.errors import SchemaTooNew, StoreReadOnly
from temporal_recall.store import SearchTarget, SqliteConversationStore
from temporal_recall.store.sql._migrations import Migration, latest_version
from temporal_recall.store.sqlite import _dialect as _sqlite_dialect
from temporal_recall.store.sqlite._dialect import MIGRATIONS

from ._support import (
    UNDO_BRANCH_MARKS,
    UNDO_SEGMENTS,
    UNDO_SUPERSEDED,
    UNDO_VERSION_13,
    UNDO_VERSION_14,
    UNDO_VERSION_15,
    UNDO_VERSION_17,
    UNDO_VERSION_18,
    UNDO_VERSION_19,
    UNDO_VERSION_20,
    index_problems,
    turn,
)

UNDO_LATER = '; '.join(
    (
        *UNDO_VERSION_20,
        *UNDO_VERSION_19,
        *UNDO_VERSION_18,
        *UNDO_VERSION_17,
        *UNDO_VERSION_15,
        *UNDO_VERSION_14,
        *UNDO_VERSION_13,
        *UNDO_SUPERSEDED,
        *UNDO_BRANCH_MARKS,
        *UNDO_SEGMENTS,
    )
)
"""What migrations 8, 10, 11, 12, 13, 14, 15 and 17 added, taken away (the blocks of 7 are undone by each test)."""

LATEST = latest_version()
NEXT = LATEST + 1
EXTRA = Migration(NEXT, 'conversation notes', ['CREATE TABLE conversation_notes (conv_key INTEGER, note TEXT)'])
CURRENT = [(migration.version, migration.name) for migration in MIGRATIONS]
POSTINGS_V1 = next(statement for statement in MIGRATIONS[0].statements if 'CREATE TABLE postings' in statement)
"""The row-per-posting table of versions 1 to 6, for making a store of those versions."""
DOCUMENTS_V1 = next(statement for statement in MIGRATIONS[0].statements if 'CREATE TABLE documents' in statement)
"""The documents table of versions 1 to 4 (a document per message, without its role)."""


def file_bytes(path: Path) -> bytes:
    return path.read_bytes()


def recorded(path: Path) -> list[tuple[int, str]]:
    with closing(sqlite3.connect(path)) as db:
        return db.execute('SELECT version, name FROM schema_migrations ORDER BY version').fetchall()


def tables(path: Path) -> set[str]:
    with closing(sqlite3.connect(path)) as db:
        return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def journal_mode(path: Path) -> str:
    with closing(sqlite3.connect(path)) as db:
        return db.execute('PRAGMA journal_mode').fetchone()[0]


async def make_v1(path: Path) -> None:
    """A store with every current migration and one conversation."""
    async with await SqliteConversationStore.open(path) as store:
        await store.save(Conversation(messages=turn(1), conversation_id='c'))


def indexes(path: Path) -> set[str]:
    with closing(sqlite3.connect(path)) as db:
        return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}


async def test_a_new_store_records_every_migration(db_path: Path) -> None:
    await make_v1(db_path)
    assert recorded(db_path) == [(migration.version, migration.name) for migration in MIGRATIONS]
    assert journal_mode(db_path) == 'wal'
    with closing(sqlite3.connect(db_path)) as db:
        applied_at = db.execute('SELECT applied_at FROM schema_migrations').fetchone()[0]
    assert applied_at.startswith('20')


async def test_reopening_applies_nothing_twice(db_path: Path) -> None:
    await make_v1(db_path)
    await make_v1(db_path.with_name('other.db'))
    async with await SqliteConversationStore.open(db_path) as store:
        assert await store.load('c') is not None
    assert recorded(db_path) == CURRENT


async def test_a_version_1_store_gets_the_real_later_migrations(db_path: Path) -> None:
    """A store written at version 1 (made here by undoing what later migrations added) is upgraded in
    place: the per-term document frequencies are backfilled and the postings end up in blocks."""
    async with await SqliteConversationStore.open(db_path) as store:
        await store.save(Conversation(messages=[*turn(1), *turn(2, 'invoice')], conversation_id='c'))
    with closing(sqlite3.connect(db_path)) as db:
        db.executescript(
            f'{UNDO_LATER}; DROP TABLE posting_blocks; {POSTINGS_V1}; DROP TABLE message_bodies; '
            'DROP TABLE term_documents; '
            'DROP TABLE index_settings; ALTER TABLE documents RENAME TO documents_v9; '
            f'{DOCUMENTS_V1}; INSERT INTO documents SELECT doc_id, tenant_id, content_hash, length, refs, term_ids '
            'FROM documents_v9; DROP TABLE documents_v9; '
            'ALTER TABLE conversation_documents DROP COLUMN occurrences; ALTER TABLE entries DROP COLUMN unindexed; '
            'DELETE FROM schema_migrations WHERE version > 1;'
        )
    assert recorded(db_path) == CURRENT[:1]
    async with await SqliteConversationStore.open(db_path) as store:
        loaded = await store.load('c')
        assert loaded is not None and loaded.messages == [*turn(1), *turn(2, 'invoice')]
        target = SearchTarget(scope=None, conversation_id=None, run_id=None)
        assert await store.document_frequencies(target, ['answer', 'invoice', 'absent']) == {'answer': 2, 'invoice': 2}
    assert recorded(db_path) == CURRENT
    assert 'posting_blocks' in tables(db_path) and 'postings' not in tables(db_path)
    assert index_problems(db_path) == []


async def test_an_older_store_gets_the_missing_migrations(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    await make_v1(db_path)
    monkeypatch.setattr(_sqlite_dialect, 'MIGRATIONS', (*MIGRATIONS, EXTRA))
    async with await SqliteConversationStore.open(db_path) as store:
        loaded = await store.load('c')
        assert loaded is not None and loaded.messages == turn(1)
    assert recorded(db_path) == [*CURRENT, (NEXT, 'conversation notes')]
    assert 'conversation_notes' in tables(db_path)


async def test_a_failing_migration_leaves_the_old_version(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    await make_v1(db_path)
    broken = Migration(NEXT, 'half done', ['CREATE TABLE half_done (x)', 'CREATE TABLE entries (x)'])
    monkeypatch.setattr(_sqlite_dialect, 'MIGRATIONS', (*MIGRATIONS, broken))
    with pytest.raises(sqlite3.OperationalError, match='already exists'):
        await SqliteConversationStore.open(db_path)
    assert recorded(db_path) == CURRENT
    assert 'half_done' not in tables(db_path)
    monkeypatch.setattr(_sqlite_dialect, 'MIGRATIONS', MIGRATIONS)
    async with await SqliteConversationStore.open(db_path) as store:
        assert await store.load('c') is not None


async def test_a_newer_store_is_left_untouched(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_sqlite_dialect, 'MIGRATIONS', (*MIGRATIONS, EXTRA))
    await make_v1(db_path)
    monkeypatch.setattr(_sqlite_dialect, 'MIGRATIONS', MIGRATIONS)
    before = file_bytes(db_path)
    with pytest.raises(
        SchemaTooNew, match=f'schema version {NEXT}, but this temporal-recall knows versions up to {LATEST}'
    ):
        await SqliteConversationStore.open(db_path)
    assert file_bytes(db_path) == before


async def test_a_rollback_journal_store_too_new_is_not_switched_to_wal(db_path: Path) -> None:
    with closing(sqlite3.connect(db_path)) as db:
        db.execute('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT, applied_at TEXT)')
        db.execute("INSERT INTO schema_migrations VALUES (?, 'future', '2099-01-01')", (NEXT,))
        db.commit()
    before = file_bytes(db_path)
    with pytest.raises(SchemaTooNew):
        await SqliteConversationStore.open(db_path)
    assert file_bytes(db_path) == before
    assert journal_mode(db_path) == 'delete'


async def test_read_only_cannot_migrate(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    await make_v1(db_path)
    monkeypatch.setattr(_sqlite_dialect, 'MIGRATIONS', (*MIGRATIONS, EXTRA))
    with pytest.raises(StoreReadOnly, match=f'needs migrating to {NEXT}'):
        await SqliteConversationStore.open(db_path, read_only=True)
    assert recorded(db_path) == CURRENT


async def test_a_version_5_store_keeps_its_bodies_and_stamps_them_with_the_upgrade_time(db_path: Path) -> None:
    """A store written before migration 6 (made here by undoing it) keeps every body, each touched at the upgrade."""
    async with await SqliteConversationStore.open(db_path) as store:
        await store.put_bodies('acme', {'h1': b'first', 'h2': b'\x00second'})
        await store.put_bodies(None, {'h1': b'unscoped'})
    with closing(sqlite3.connect(db_path)) as db:
        db.executescript(
            'DROP INDEX message_bodies_by_touched; ALTER TABLE message_bodies DROP COLUMN touched_at; '
            f'{UNDO_LATER}; DROP TABLE posting_blocks; {POSTINGS_V1}; {MIGRATIONS[1].statements[0]}; '
            'DELETE FROM schema_migrations WHERE version > 5;'
        )
    assert recorded(db_path) == CURRENT[:5]
    before = int(time.time())
    async with await SqliteConversationStore.open(db_path) as store:
        assert await store.get_bodies('acme', ['h1', 'h2']) == {'h1': b'first', 'h2': b'\x00second'}
        assert await store.get_bodies(None, ['h1']) == {'h1': b'unscoped'}
        assert [(entry.scope, entry.bodies) for entry in await store.body_stats()] == [(None, 1), ('acme', 2)]
    assert recorded(db_path) == CURRENT
    assert 'message_bodies_by_touched' in indexes(db_path)
    with closing(sqlite3.connect(db_path)) as db:
        stamps = [row[0] for row in db.execute('SELECT touched_at FROM message_bodies')]
    assert len(stamps) == 3 and all(before - 1 <= stamp <= time.time() + 1 for stamp in stamps)


BODIES_BY_HASH = next(m.version for m in MIGRATIONS if any('message_bodies_by_hash' in s for s in m.statements))


async def test_a_store_before_the_body_hash_index_gets_it_and_keeps_its_bodies(db_path: Path) -> None:
    """A store written before the migration that indexes bodies by hash (made here by undoing it)."""
    async with await SqliteConversationStore.open(db_path) as store:
        await store.put_bodies('acme', {'h1': b'first', 'h2': b'second'})
        await store.put_bodies(None, {'h1': b'unscoped'})
    with closing(sqlite3.connect(db_path)) as db, db:
        undo = (*UNDO_VERSION_20, *UNDO_VERSION_19, *UNDO_VERSION_18, *UNDO_VERSION_17, *UNDO_VERSION_15)
        undo += (*UNDO_VERSION_14, *UNDO_VERSION_13)
        db.executescript(f'{"; ".join(undo)}; DELETE FROM schema_migrations WHERE version >= {BODIES_BY_HASH};')
    assert recorded(db_path) == CURRENT[: BODIES_BY_HASH - 1]
    assert 'message_bodies_by_hash' not in indexes(db_path)
    async with await SqliteConversationStore.open(db_path) as store:
        assert await store.body_scopes(['h1']) == [None, 'acme']
        assert await store.get_bodies('acme', ['h1', 'h2']) == {'h1': b'first', 'h2': b'second'}
    assert recorded(db_path) == CURRENT
    assert 'message_bodies_by_hash' in indexes(db_path)


async def test_the_store_checkpoints_its_write_ahead_log_in_large_batches(db_path: Path) -> None:
    """An indexed write dirties a page per term: checkpointing at SQLite's default of 1,000 pages would
    copy the hottest pages into the database after every commit (`CHECKPOINT_PAGES`)."""
    from temporal_recall.store.sql._session import Session
    from temporal_recall.store.sqlite._opener import CHECKPOINT_PAGES

    async def settings(session: Session) -> tuple[int, int]:
        return await session.value('PRAGMA wal_autocheckpoint'), await session.value('PRAGMA journal_size_limit')

    async with await SqliteConversationStore.open(db_path) as store:
        pages, limit = await store._backend.run_read(settings, snapshot=False)  # pyright: ignore[reportPrivateUsage]
    assert pages == CHECKPOINT_PAGES > 1_000
    assert limit == 4096 * CHECKPOINT_PAGES
