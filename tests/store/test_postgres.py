"""Opening a PostgreSQL store: URLs and options, and unusable servers raising a clear, retryable-or-not error.

The SQLite counterparts (not a database, locked, closed, read-only) live in `test_bad_input.py`; what
is specific to a server — a database that does not exist, a port nobody listens on, a refused login,
an exhausted pool, a connection the server dropped — is here.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
from asyncpg import exceptions as pg
from pydantic_ai.conversation import Conversation

from temporal_recall.errors import (
    ConfigurationError,
    NotADatabase,
    StoreReadOnly,
    StoreUnavailable,
)
from temporal_recall.store import AppendRequest, PostgresConversationStore, SearchTarget, open_store
from temporal_recall.store.postgres._connection import translate_error

from ._support import PostgresSite, hex_hash, postgres_url, postings_of, turn, with_options

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def pg_site() -> AsyncIterator[PostgresSite]:
    site = PostgresSite(postgres_url())
    try:
        yield site
    finally:
        await site.close()


def elsewhere(url: str, *, netloc: str | None = None, path: str | None = None) -> str:
    """`url` with another host part or database."""
    scheme, rest = url.split('://', 1)
    host, _, tail = rest.partition('/')
    database, query = tail.partition('?')[0], tail.partition('?')[2]
    return f'{scheme}://{netloc or host}/{path or database}' + (f'?{query}' if query else '')


async def schema_tables(site: PostgresSite) -> list[str]:
    connection = await asyncpg.connect(site.base_url)
    try:
        rows = await connection.fetch(
            'SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace '
            "WHERE n.nspname = $1 AND c.relkind = 'r' ORDER BY 1",
            site.schema,
        )
        return [row[0] for row in rows]
    finally:
        await connection.close()


async def test_open_store_selects_postgres_for_both_schemes(pg_site: PostgresSite) -> None:
    for index, url in enumerate((pg_site.url, 'postgres://' + pg_site.url.split('://', 1)[1])):
        store = await open_store(with_options(url, pool_max=3, application_name='recall-test'))
        try:
            assert isinstance(store, PostgresConversationStore)
            assert store.schema == pg_site.schema
            await store.save(Conversation(messages=turn(1), conversation_id=f'c{index}'))
        finally:
            await store.close()
    assert 'conversations' in await schema_tables(pg_site)


async def test_schemas_in_one_database_are_separate_stores(pg_site: PostgresSite) -> None:
    other = PostgresSite(pg_site.base_url)
    try:
        async with await pg_site.open() as first, await other.open() as second:
            await first.save(Conversation(messages=turn(1), conversation_id='mine'))
            assert await second.load('mine') is None
            assert await second.list_conversations() == []
            everything = SearchTarget(scope=None, conversation_id=None)
            assert await postings_of(second, everything, ['weather']) == {}
            assert (await postings_of(first, everything, ['weather']))['weather']
    finally:
        await other.close()


async def test_a_database_that_does_not_exist(pg_site: PostgresSite) -> None:
    url = elsewhere(pg_site.url, path=f'no_such_db_{uuid.uuid4().hex[:8]}')
    with pytest.raises(NotADatabase, match=r'does not exist.*createdb'):
        await open_store(url)


async def test_a_port_nobody_listens_on_is_unavailable(pg_site: PostgresSite) -> None:
    url = elsewhere(pg_site.url, netloc='someone:hunter2@127.0.0.1:1')
    with pytest.raises(StoreUnavailable, match=r'Cannot reach .*127\.0\.0\.1:1.*server is running') as raised:
        await open_store(with_options(url, connect_timeout_ms=2000))
    assert 'hunter2' not in str(raised.value)


async def test_an_unknown_role_is_a_configuration_error(pg_site: PostgresSite) -> None:
    host = elsewhere(pg_site.url).split('://', 1)[1].split('/', 1)[0].rpartition('@')[2]
    url = elsewhere(pg_site.url, netloc=f'no_such_role_{uuid.uuid4().hex[:6]}:secret@{host}')
    with pytest.raises(ConfigurationError, match='refused the login') as raised:
        await open_store(url)
    assert 'secret' not in str(raised.value)


async def test_an_exhausted_pool_is_unavailable_not_a_hang(pg_site: PostgresSite) -> None:
    async with await pg_site.open(pool_min=1, pool_max=1, acquire_timeout_ms=150) as store:
        async with store._db.connection():
            with pytest.raises(StoreUnavailable, match=r'no free connection for 150 ms.*pool_max'):
                await store.load('c')
        assert await store.load('c') is None  # and works once the connection is back


async def test_a_dropped_connection_is_unavailable_then_recovers(pg_site: PostgresSite) -> None:
    name = f'recall-drop-{uuid.uuid4().hex[:8]}'
    async with await pg_site.open(pool_min=1, pool_max=1, application_name=name) as store:
        await store.save(Conversation(messages=turn(1), conversation_id='c'))
        admin = await asyncpg.connect(pg_site.base_url)
        try:
            killed = await admin.fetchval(
                'SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1', name
            )
        finally:
            await admin.close()
        assert killed == 1
        try:  # Whether the client noticed the drop before this call is a matter of timing.
            await store.load('c')
        except StoreUnavailable as error:
            assert 'Retry' in str(error)
        loaded = await store.load('c')  # the pool replaced the dead connection
        assert loaded is not None and loaded.messages == turn(1)


async def test_a_connection_killed_mid_write_is_unavailable_and_the_retry_applies_once(pg_site: PostgresSite) -> None:
    name = f'recall-kill-{uuid.uuid4().hex[:8]}'
    async with await pg_site.open(application_name=name) as store:
        await store.save(Conversation(messages=turn(1), conversation_id='c'))
        request = AppendRequest(
            conversation_id='c',
            scope=None,
            idempotency_key='k',
            base_length=2,
            base_hash=hex_hash(turn(1)[1]),
            messages=turn(2),
        )
        admin = await asyncpg.connect(pg_site.base_url)
        try:
            async with admin.transaction():  # Holds the conversation's row, so the append waits on its lock.
                await admin.execute(f'SELECT 1 FROM "{pg_site.schema}".conversations FOR UPDATE')
                pending = asyncio.create_task(store.append(request))
                for _ in range(100):
                    killed = await admin.fetchval(
                        'SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity '
                        "WHERE application_name = $1 AND wait_event_type = 'Lock'",
                        name,
                    )
                    if killed:
                        break
                    await asyncio.sleep(0.05)
                with pytest.raises(StoreUnavailable, match='Retry'):
                    await pending
        finally:
            await admin.close()
        result = await store.append(request)  # What an activity retry does: the same key, applied once.
        assert (result.stored, result.replayed, result.length) == (2, False, 4)
        loaded = await store.load('c')
        assert loaded is not None and loaded.messages == [*turn(1), *turn(2)]


@pytest.mark.parametrize(
    ('error', 'expected'),
    [
        (ConnectionRefusedError(111, 'Connection refused'), StoreUnavailable),
        (TimeoutError(), StoreUnavailable),
        (
            pg.ConnectionDoesNotExistError('connection was closed in the middle of operation'),
            StoreUnavailable,
        ),
        (
            pg.AdminShutdownError('terminating connection due to administrator command'),
            StoreUnavailable,
        ),
        (pg.CannotConnectNowError('the database system is starting up'), StoreUnavailable),
        (pg.TooManyConnectionsError('sorry, too many clients already'), StoreUnavailable),
        (pg.DeadlockDetectedError('deadlock detected'), StoreUnavailable),
        (pg.DiskFullError('could not extend file'), StoreUnavailable),
        (pg.InvalidCatalogNameError('database "x" does not exist'), NotADatabase),
        (pg.InvalidPasswordError('password authentication failed'), ConfigurationError),
        (
            pg.ReadOnlySQLTransactionError('cannot execute INSERT in a read-only transaction'),
            StoreReadOnly,
        ),
        (pg.InsufficientPrivilegeError('permission denied for schema x'), StoreReadOnly),
    ],
)
def test_driver_errors_map_to_store_errors(error: BaseException, expected: type[Exception]) -> None:
    translated = translate_error(error, 'postgresql://u@h/db')
    assert type(translated) is expected
    assert 'postgresql://u@h/db' in str(translated)


def test_errors_that_indicate_a_bug_are_not_translated() -> None:
    assert translate_error(pg.UndefinedTableError('relation "x" does not exist'), 'u') is None
    assert translate_error(ValueError('x'), 'u') is None


async def test_a_statement_timeout_is_unavailable(pg_site: PostgresSite) -> None:
    async with await pg_site.open() as store:
        await store.save(Conversation(messages=turn(1), conversation_id='c'))
    holder = await asyncpg.connect(pg_site.base_url)
    try:
        async with holder.transaction():
            await holder.execute(f'SELECT 1 FROM "{pg_site.schema}".conversations FOR UPDATE')
            # The lock holder never lets go, so the append times out whatever the limit; a limit of 2 s keeps the
            # open's own catalog reads clear of it on a machine busy enough to slow them (200 ms once was not).
            async with await pg_site.open(statement_timeout_ms=2000) as impatient:
                request = AppendRequest(
                    conversation_id='c',
                    scope=None,
                    idempotency_key='k',
                    base_length=0,
                    base_hash=None,
                    messages=turn(2),
                )
                with pytest.raises(StoreUnavailable, match='statement_timeout_ms'):
                    await impatient.append(request)
    finally:
        await holder.close()


async def test_closed_store(pg_site: PostgresSite) -> None:
    store = await pg_site.open()
    await store.close()
    await store.close()
    with pytest.raises(StoreUnavailable, match='is closed'):
        await store.load('c')


async def test_read_only_option(pg_site: PostgresSite) -> None:
    with pytest.raises(StoreReadOnly, match=r'needs migrating to \d'):
        await pg_site.open(read_only=True)
    assert await schema_tables(pg_site) == []
    async with await pg_site.open() as store:
        await store.save(Conversation(messages=turn(1), conversation_id='c'))
    async with await pg_site.open(read_only=True) as store:
        loaded = await store.load('c')
        assert loaded is not None and loaded.messages == turn(1)
        loaded.messages.extend(turn(2))
        with pytest.raises(StoreReadOnly, match='read_only=true'):
            await store.save(loaded)
        with pytest.raises(StoreReadOnly):
            await store.delete('c')
        # Even a statement that slipped past the store's check is refused by the server's read-only session.
        async with store._db.connection() as connection, connection.transaction():
            with pytest.raises(pg.ReadOnlySQLTransactionError):
                await connection.execute('DELETE FROM applied_writes')


async def test_someone_elses_schema_is_not_a_store(pg_site: PostgresSite) -> None:
    admin = await asyncpg.connect(pg_site.base_url)
    try:
        await admin.execute(f'CREATE SCHEMA "{pg_site.schema}"')
        await admin.execute(f'CREATE TABLE "{pg_site.schema}".users (name text)')
        with pytest.raises(NotADatabase, match=r'no schema_migrations.*\?schema='):
            await pg_site.open()
        assert await schema_tables(pg_site) == ['users']
    finally:
        await admin.close()


async def test_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, 'asyncpg', None)
    for name in [name for name in sys.modules if name.startswith('temporal_recall.store.postgres')]:
        if name != 'temporal_recall.store.postgres._url':
            monkeypatch.delitem(sys.modules, name)
    with pytest.raises(ConfigurationError, match=r'pip install "temporal-recall\[postgres\]"'):
        await open_store('postgresql://user@127.0.0.1:1/db')


def test_the_driver_is_imported_only_for_postgres_urls(tmp_path: Path) -> None:
    code = (
        'import asyncio, sys\n'
        'import temporal_recall.store as store\n'
        "assert 'asyncpg' not in sys.modules, 'imported by the package'\n"
        f'opened = asyncio.run(store.open_store({str(tmp_path / "x.db")!r}))\n'
        'asyncio.run(opened.close())\n'
        "assert 'asyncpg' not in sys.modules, 'imported by a SQLite open'\n"
    )
    result = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


async def test_concurrent_tasks_share_one_store(pg_site: PostgresSite) -> None:
    """One store serves many tasks at once through its pool (each operation borrows a connection)."""
    async with await pg_site.open(pool_max=4) as store:

        async def converse(index: int) -> None:
            conversation = Conversation(conversation_id=f'c{index}')
            for step in range(3):
                conversation.messages.extend(turn(step, f'topic{index}'))
                await store.save(conversation, scope='team')

        await asyncio.gather(*(converse(index) for index in range(16)))
        stats = await store.stats()
        assert (stats.conversations, stats.entries) == (16, 16 * 6)
