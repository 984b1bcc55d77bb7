"""PostgreSQL migrations: recorded like SQLite's, applied once under an advisory lock, refused when too new.

The race that matters in production: several workers starting together against an empty database.
`test_workers_opening_an_empty_database_at_once_migrate_it_once` makes the window wide (a migration
that sleeps) and opens the store from separate processes at the same moment.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
from asyncpg import exceptions as pg
from pydantic_ai.conversation import Conversation

from temporal_recall.errors import SchemaTooNew, StoreReadOnly
from temporal_recall.store import SearchTarget
from temporal_recall.store.postgres import _dialect as _postgres_dialect
from temporal_recall.store.postgres._dialect import MIGRATIONS
from temporal_recall.store.sql._migrations import Migration, latest_version

from ._support import (
    UNDO_BRANCH_MARKS,
    UNDO_SEGMENTS,
    UNDO_SUPERSEDED,
    UNDO_VERSION_13,
    UNDO_VERSION_14,
    UNDO_VERSION_15,
    UNDO_VERSION_16_POSTGRES,
    UNDO_VERSION_17,
    UNDO_VERSION_18,
    UNDO_VERSION_19,
    UNDO_VERSION_20,
    PostgresSite,
    postgres_url,
    problems_of,
    turn,
)

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]
LATEST = latest_version(MIGRATIONS)
NEXT = LATEST + 1
EXTRA = Migration(NEXT, 'conversation notes', ['CREATE TABLE conversation_notes (conv_key BIGINT, note TEXT)'])
SLOW = Migration(NEXT, 'slow', ['SELECT pg_sleep(0.5)', 'CREATE TABLE slow_notes (note TEXT)'])
RECORDED = [(migration.version, migration.name) for migration in MIGRATIONS]


@pytest.fixture
async def pg_site() -> AsyncIterator[PostgresSite]:
    site = PostgresSite(postgres_url())
    try:
        yield site
    finally:
        await site.close()


async def catalog(site: PostgresSite) -> dict[str, object]:
    """What a migration could change: the schema's tables, their columns, and the recorded versions."""
    connection = await asyncpg.connect(site.base_url)
    try:
        columns = await connection.fetch(
            'SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_schema = $1 '
            'ORDER BY 1, 2',
            site.schema,
        )
        recorded: list[tuple[int, str]] = []
        if any(row[0] == 'schema_migrations' for row in columns):
            recorded = [
                (row[0], row[1])
                for row in await connection.fetch(
                    f'SELECT version, name FROM "{site.schema}".schema_migrations ORDER BY version'
                )
            ]
        return {'columns': [tuple(row) for row in columns], 'recorded': recorded}
    finally:
        await connection.close()


async def recorded(site: PostgresSite) -> list[tuple[int, str]]:
    found = (await catalog(site))['recorded']
    assert isinstance(found, list)
    return found


async def tables(site: PostgresSite) -> set[str]:
    columns = (await catalog(site))['columns']
    assert isinstance(columns, list)
    return {row[0] for row in columns}


async def make_v1(site: PostgresSite) -> None:
    async with await site.open() as store:
        await store.save(Conversation(messages=turn(1), conversation_id='c'))


async def test_a_new_store_records_every_migration(pg_site: PostgresSite) -> None:
    await make_v1(pg_site)
    assert await recorded(pg_site) == RECORDED
    connection = await asyncpg.connect(pg_site.base_url)
    try:
        applied_at = await connection.fetchval(f'SELECT applied_at FROM "{pg_site.schema}".schema_migrations')
    finally:
        await connection.close()
    assert applied_at.startswith('20')


async def test_reopening_applies_nothing_twice(pg_site: PostgresSite) -> None:
    await make_v1(pg_site)
    async with await pg_site.open() as store:
        assert await store.load('c') is not None
    assert await recorded(pg_site) == RECORDED


async def test_an_older_store_gets_the_missing_migrations(
    pg_site: PostgresSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    await make_v1(pg_site)
    monkeypatch.setattr(_postgres_dialect, 'MIGRATIONS', (*MIGRATIONS, EXTRA))
    async with await pg_site.open() as store:
        loaded = await store.load('c')
        assert loaded is not None and loaded.messages == turn(1)
    assert await recorded(pg_site) == [*RECORDED, (NEXT, 'conversation notes')]
    assert 'conversation_notes' in await tables(pg_site)


async def test_a_failing_migration_leaves_the_old_version(
    pg_site: PostgresSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    await make_v1(pg_site)
    broken = Migration(NEXT, 'half done', ['CREATE TABLE half_done (x INT)', 'CREATE TABLE entries (x INT)'])
    monkeypatch.setattr(_postgres_dialect, 'MIGRATIONS', (*MIGRATIONS, broken))
    with pytest.raises(pg.DuplicateTableError, match='already exists'):
        await pg_site.open()
    assert await recorded(pg_site) == RECORDED
    assert 'half_done' not in await tables(pg_site)
    monkeypatch.setattr(_postgres_dialect, 'MIGRATIONS', MIGRATIONS)
    async with await pg_site.open() as store:
        assert await store.load('c') is not None


async def test_a_failing_first_migration_leaves_no_schema(
    pg_site: PostgresSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = Migration(1, 'broken', ['CREATE TABLE one (x INT)', 'CREATE TABLE one (x INT)'])
    monkeypatch.setattr(_postgres_dialect, 'MIGRATIONS', (broken,))
    with pytest.raises(pg.DuplicateTableError):
        await pg_site.open()
    connection = await asyncpg.connect(pg_site.base_url)
    try:
        assert await connection.fetchval('SELECT 1 FROM pg_namespace WHERE nspname = $1', pg_site.schema) is None
    finally:
        await connection.close()


async def test_a_newer_store_is_left_untouched(pg_site: PostgresSite, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_postgres_dialect, 'MIGRATIONS', (*MIGRATIONS, EXTRA))
    await make_v1(pg_site)
    monkeypatch.setattr(_postgres_dialect, 'MIGRATIONS', MIGRATIONS)
    before = await catalog(pg_site)
    with pytest.raises(
        SchemaTooNew, match=f'schema version {NEXT}, but this temporal-recall knows versions up to {LATEST}'
    ) as raised:
        await pg_site.open()
    assert pg_site.schema in str(raised.value) and 'left untouched' in str(raised.value)
    assert await catalog(pg_site) == before


async def test_read_only_cannot_migrate(pg_site: PostgresSite, monkeypatch: pytest.MonkeyPatch) -> None:
    await make_v1(pg_site)
    monkeypatch.setattr(_postgres_dialect, 'MIGRATIONS', (*MIGRATIONS, EXTRA))
    with pytest.raises(StoreReadOnly, match=f'needs migrating to {NEXT}'):
        await pg_site.open(read_only=True)
    assert await recorded(pg_site) == RECORDED


async def test_stores_opening_an_empty_schema_at_once_migrate_it_once(
    pg_site: PostgresSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight stores (eight sessions) race to create a store whose migrations take half a second."""
    monkeypatch.setattr(_postgres_dialect, 'MIGRATIONS', (*MIGRATIONS, SLOW))
    outcomes = await asyncio.gather(*(pg_site.open() for _ in range(8)), return_exceptions=True)
    opened = [outcome for outcome in outcomes if not isinstance(outcome, BaseException)]
    try:
        assert len(opened) == 8, [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        await opened[3].save(Conversation(messages=turn(1), conversation_id='c'))
        loaded = await opened[5].load('c')
        assert loaded is not None and loaded.messages == turn(1)
    finally:
        for store in opened:
            await store.close()
    assert await recorded(pg_site) == [*RECORDED, (NEXT, 'slow')]


_OPENER = """
import asyncio, sys, time
from temporal_recall.store import open_store
from temporal_recall.store.postgres import _dialect as _postgres_dialect
from temporal_recall.store.sql._migrations import Migration, latest_version

_postgres_dialect.MIGRATIONS = (
    *_postgres_dialect.MIGRATIONS,
    Migration(latest_version() + 1, 'slow', ['SELECT pg_sleep(0.5)']),
)


async def main(url: str, start: float) -> None:
    time.sleep(max(0.0, start - time.time()))
    store = await open_store(url)
    await store.close()
    print('opened')


asyncio.run(main(sys.argv[1], float(sys.argv[2])))
"""


def test_workers_opening_an_empty_database_at_once_migrate_it_once(pg_site: PostgresSite) -> None:
    """Separate processes, started together: the shape of a fleet of workers booting against a new database."""
    start = time.time() + 2.0
    processes = [
        subprocess.Popen(
            [sys.executable, '-c', _OPENER, pg_site.url, str(start)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outcomes = [process.communicate(timeout=60) for process in processes]
    for process, (stdout, stderr) in zip(processes, outcomes, strict=True):
        assert process.returncode == 0, stderr
        assert stdout.strip() == 'opened'
    assert asyncio.run(recorded(pg_site)) == [*RECORDED, (NEXT, 'slow')]


async def _undo_blocks(connection: asyncpg.Connection, schema: str) -> None:
    """Put back the (empty) row-per-posting table of versions 1 to 6 in place of `posting_blocks` (and undo
    the later migrations: the pending postings of version 8 and what 10 to 12 added)."""
    await connection.execute(f'SET search_path TO "{schema}"')
    for statement in (
        *UNDO_VERSION_20,
        *UNDO_VERSION_19,
        *UNDO_VERSION_18,
        *UNDO_VERSION_17,
        *UNDO_VERSION_16_POSTGRES,
        *UNDO_VERSION_15,
        *UNDO_VERSION_14,
        *UNDO_VERSION_13,
        *UNDO_SUPERSEDED,
        *UNDO_BRANCH_MARKS,
        *UNDO_SEGMENTS,
    ):
        await connection.execute(statement)
    await connection.execute('DROP TABLE posting_blocks')
    for statement in [s for s in MIGRATIONS[0].statements if 'CREATE TABLE postings' in s] + [
        *MIGRATIONS[1].statements
    ]:
        await connection.execute(statement)


async def test_a_version_3_store_gets_its_term_frequencies_backfilled(pg_site: PostgresSite) -> None:
    """A store written before migration 4 (made here by undoing 7, 6, 5 and 4) is upgraded in place, consistent."""
    async with await pg_site.open() as store:
        await store.save(Conversation(messages=[*turn(1), *turn(2, 'invoice')], conversation_id='c'))
    connection = await asyncpg.connect(pg_site.base_url)
    try:
        await _undo_blocks(connection, pg_site.schema)
        await connection.execute(f'DROP TABLE "{pg_site.schema}".term_documents')
        await connection.execute(f'DROP TABLE "{pg_site.schema}".index_settings')
        for table, column in (
            ('message_bodies', 'touched_at'),
            ('documents', 'role'),
            ('conversation_documents', 'occurrences'),
            ('entries', 'unindexed'),
        ):
            await connection.execute(f'ALTER TABLE "{pg_site.schema}".{table} DROP COLUMN {column}')
        await connection.execute(f'DELETE FROM "{pg_site.schema}".schema_migrations WHERE version > 3')
    finally:
        await connection.close()
    assert await recorded(pg_site) == RECORDED[:3]
    async with await pg_site.open() as store:
        target = SearchTarget(scope=None, conversation_id=None, run_id=None)
        assert await store.document_frequencies(target, ['answer', 'invoice', 'absent']) == {'answer': 2, 'invoice': 2}
        assert await problems_of(store) == []
    assert await recorded(pg_site) == RECORDED


async def test_a_version_5_store_keeps_its_bodies_and_stamps_them_with_the_upgrade_time(pg_site: PostgresSite) -> None:
    """A store written before migration 6 (made here by undoing it) keeps every body, each touched at the upgrade."""
    async with await pg_site.open() as store:
        await store.put_bodies('acme', {'h1': b'first', 'h2': b'\x00second'})
        await store.put_bodies(None, {'h1': b'unscoped'})
    schema = f'"{pg_site.schema}"'
    connection = await asyncpg.connect(pg_site.base_url)
    try:
        await _undo_blocks(connection, pg_site.schema)
        await connection.execute(f'ALTER TABLE {schema}.message_bodies DROP COLUMN touched_at')  # and its index
        await connection.execute(f'DELETE FROM {schema}.schema_migrations WHERE version > 5')
    finally:
        await connection.close()
    assert await recorded(pg_site) == RECORDED[:5]
    before = int(time.time())
    async with await pg_site.open() as store:
        assert await store.get_bodies('acme', ['h1', 'h2']) == {'h1': b'first', 'h2': b'\x00second'}
        assert await store.get_bodies(None, ['h1']) == {'h1': b'unscoped'}
        assert [(entry.scope, entry.bodies) for entry in await store.body_stats()] == [(None, 1), ('acme', 2)]
    assert await recorded(pg_site) == RECORDED
    connection = await asyncpg.connect(pg_site.base_url)
    try:
        stamps = [row[0] for row in await connection.fetch(f'SELECT touched_at FROM {schema}.message_bodies')]
        index = await connection.fetchval('SELECT to_regclass($1)', f'{schema}.message_bodies_by_touched')
    finally:
        await connection.close()
    assert index is not None
    assert len(stamps) == 3 and all(before - 1 <= stamp <= time.time() + 1 for stamp in stamps)


BODIES_BY_HASH = next(m.version for m in MIGRATIONS if any('message_bodies_by_hash' in s for s in m.statements))


async def test_a_store_before_the_body_hash_index_gets_it_and_keeps_its_bodies(pg_site: PostgresSite) -> None:
    """A store written before the migration that indexes bodies by hash (made here by undoing it)."""
    async with await pg_site.open() as store:
        await store.put_bodies('acme', {'h1': b'first', 'h2': b'second'})
        await store.put_bodies(None, {'h1': b'unscoped'})
    schema = f'"{pg_site.schema}"'
    connection = await asyncpg.connect(pg_site.base_url)
    try:
        await connection.execute(f'SET search_path TO {schema}')
        for statement in (
            *UNDO_VERSION_20,
            *UNDO_VERSION_19,
            *UNDO_VERSION_18,
            *UNDO_VERSION_17,
            *UNDO_VERSION_16_POSTGRES,
            *UNDO_VERSION_15,
            *UNDO_VERSION_14,
            *UNDO_VERSION_13,
            f'DELETE FROM schema_migrations WHERE version >= {BODIES_BY_HASH}',
        ):
            await connection.execute(statement)
    finally:
        await connection.close()
    assert await recorded(pg_site) == RECORDED[: BODIES_BY_HASH - 1]
    async with await pg_site.open() as store:
        assert await store.body_scopes(['h1']) == [None, 'acme']
        assert await store.get_bodies('acme', ['h1', 'h2']) == {'h1': b'first', 'h2': b'second'}
    assert await recorded(pg_site) == RECORDED
    connection = await asyncpg.connect(pg_site.base_url)
    try:
        assert await connection.fetchval('SELECT to_regclass($1)', f'{schema}.message_bodies_by_hash') is not None
    finally:
        await connection.close()
