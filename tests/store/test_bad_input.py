"""Bad input and unusable databases raise a clear error naming the problem, and change nothing."""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationRecord
from pydantic_ai.exceptions import UserError

from temporal_recall import search_index
from temporal_recall._validation import MAX_ID_LENGTH
from temporal_recall.errors import (
    ConfigurationError,
    InvalidIdentifier,
    InvalidQuery,
    MessageNotSerializable,
    NotADatabase,
    RecallError,
    SchemaTooNew,
    StoreReadOnly,
    StoreUnavailable,
    UnknownConversation,
    UnknownEntry,
)
from temporal_recall.models import SearchRequest
from temporal_recall.store import AppendRequest, SearchTarget, SqliteConversationStore, open_store

from ._another_user import as_another_user, give_to_another_user
from ._support import AnyStore, row_counts, tool_return, turn, user


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def listing(folder: Path) -> list[str]:
    return sorted(item.name for item in folder.iterdir())


def set_modes(path: Path, file_mode: int, folder_mode: int) -> None:
    path.chmod(file_mode)
    path.parent.chmod(folder_mode)


@pytest.fixture
async def filled(db_path: Path) -> AsyncIterator[SqliteConversationStore]:
    """A store holding one conversation 'c' of two turns."""
    store = await SqliteConversationStore.open(db_path)
    try:
        await store.save(Conversation(messages=[*turn(1), *turn(2)], conversation_id='c'), scope='s')
        yield store
    finally:
        await store.close()


@pytest.fixture
async def filled_any(recall_store: AnyStore) -> AnyStore:
    """A store of each real backend holding one conversation 'c' of two turns."""
    await recall_store.save(Conversation(messages=[*turn(1), *turn(2)], conversation_id='c'), scope='s')
    return recall_store


async def snapshot(store: AnyStore) -> tuple[object, ...]:
    return (await store.load('c'), await store.read_record('c'), await row_counts(store))


async def test_unknown_conversation(filled_any: AnyStore) -> None:
    before = await snapshot(filled_any)
    with pytest.raises(UserError, match="'nope' is not in the store"):
        await filled_any.branch('nope', at=0, expected_revision=None)
    with pytest.raises(UserError, match="'nope' is not in the store"):
        await filled_any.fork('nope')
    with pytest.raises(UnknownConversation, match="'nope' is not in the store"):
        await filled_any.append(
            AppendRequest(
                conversation_id='nope',
                scope='s',
                idempotency_key='k',
                base_length=0,
                base_hash=None,
                messages=turn(1),
                create=False,
            )
        )
    await filled_any.delete('nope')
    assert await snapshot(filled_any) == before


async def test_negative_limits(filled_any: AnyStore) -> None:
    before = await snapshot(filled_any)
    for call in (
        filled_any.load('c', limit=-1),
        filled_any.load_entries('c', limit=-1),
        filled_any.list_conversations(limit=-1),
        filled_any.read_records(limit=-1),
        filled_any.read_history('x', limit=-1),
    ):
        with pytest.raises(UserError, match='must not be negative'):
            await call
    assert await snapshot(filled_any) == before


async def test_nonexistent_entry(filled_any: AnyStore) -> None:
    before = await snapshot(filled_any)
    with pytest.raises(UnknownEntry, match="'missing-entry' is not in the store") as raised:
        await filled_any.read_entry('missing-entry')
    assert isinstance(raised.value, LookupError)  # what pydantic-ai's ConversationStore catches
    with pytest.raises(UnknownEntry):
        await filled_any.read_history('missing-entry')
    loaded = await filled_any.load('c')
    assert loaded is not None
    with pytest.raises(UserError, match="Entry 'missing-entry' is not in the history"):
        await filled_any.branch('c', from_entry='missing-entry', expected_revision=loaded.revision)
    with pytest.raises(UserError, match="Entry 'missing-entry' is not in the history"):
        await filled_any.fork('c', from_entry='missing-entry')
    assert await snapshot(filled_any) == before


async def test_message_that_does_not_serialize(filled_any: AnyStore) -> None:
    before = await snapshot(filled_any)
    loaded = await filled_any.load('c')
    assert loaded is not None
    loaded.messages.extend([user('fine'), tool_return('fetch', object(), 'call-1')])
    with pytest.raises(MessageNotSerializable, match='ModelRequest could not be serialized'):
        await filled_any.save(loaded)
    assert await snapshot(filled_any) == before


async def test_write_record_naming_missing_entries_conflicts(filled_any: AnyStore) -> None:
    from pydantic_ai.conversation_store import ConversationConflict, ConversationEntry

    before = await snapshot(filled_any)
    orphan = ConversationEntry(parent_id='released', message=user('x'))
    with pytest.raises(ConversationConflict):
        await filled_any.write_record(
            ConversationRecord(conversation_id='n', head_id=orphan.id), new_entries=[orphan], expected_revision=None
        )
    with pytest.raises(ConversationConflict):
        await filled_any.write_record(
            ConversationRecord(conversation_id='n', head_id=None, branches=['released']), expected_revision=None
        )
    assert await snapshot(filled_any) == before


async def test_not_a_database_file(tmp_path: Path) -> None:
    path = tmp_path / 'notes.txt'
    path.write_text('these are my notes, not a database\n' * 100)
    before = digest(path)
    with pytest.raises(NotADatabase, match=str(path)):
        await SqliteConversationStore.open(path)
    assert digest(path) == before
    assert listing(tmp_path) == ['notes.txt']


async def test_a_directory_is_not_a_database(tmp_path: Path) -> None:
    with pytest.raises(NotADatabase, match='is a directory'):
        await SqliteConversationStore.open(tmp_path)


async def test_someone_elses_sqlite_database(tmp_path: Path) -> None:
    path = tmp_path / 'app.db'
    with closing(sqlite3.connect(path)) as db:
        db.execute('CREATE TABLE users (name TEXT)')
        db.execute("INSERT INTO users VALUES ('ada')")
        db.commit()
    before = digest(path)
    with pytest.raises(NotADatabase, match='not a temporal-recall store'):
        await SqliteConversationStore.open(path)
    assert digest(path) == before


async def test_an_empty_file_becomes_a_store(tmp_path: Path) -> None:
    path = tmp_path / 'empty.db'
    path.touch()
    async with await SqliteConversationStore.open(path) as store:
        assert await store.list_conversations() == []


async def test_schema_newer_than_the_code(filled: SqliteConversationStore, db_path: Path) -> None:
    await filled.close()
    with closing(sqlite3.connect(db_path)) as db:
        db.execute("INSERT INTO schema_migrations VALUES (99, 'from the future', '2099-01-01')")
        db.commit()
    before = digest(db_path)
    with pytest.raises(SchemaTooNew, match=r'schema version 99.*versions up to \d+') as raised:
        await SqliteConversationStore.open(db_path)
    assert str(db_path) in str(raised.value)
    assert digest(db_path) == before


async def test_read_only_store_refuses_writes(filled: SqliteConversationStore, db_path: Path) -> None:
    before = await snapshot(filled)
    await filled.close()
    async with await SqliteConversationStore.open(db_path, read_only=True) as store:
        assert await snapshot(store) == before
        loaded = await store.load('c')
        assert loaded is not None
        loaded.messages.append(user('more'))
        with pytest.raises(StoreReadOnly, match=str(db_path)) as raised:
            await store.save(loaded)
        assert 'read_only' in str(raised.value)
        with pytest.raises(StoreReadOnly):
            await store.delete('c')
        assert await snapshot(store) == before


async def test_sqlite_refusing_writes_is_store_read_only(filled: SqliteConversationStore) -> None:
    before = await snapshot(filled)
    await filled._db.connection.execute_fetchall('PRAGMA query_only = ON')
    loaded = await filled.load('c')
    assert loaded is not None
    loaded.messages.append(user('more'))
    with pytest.raises(StoreReadOnly, match='permissions or the mount'):
        await filled.save(loaded)
    assert await snapshot(filled) == before


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """An empty folder that `as_another_user` can reach (pytest's own temporary folders are the user's alone)."""
    with tempfile.TemporaryDirectory(prefix='recall-permissions-') as name:
        folder = Path(name)
        folder.chmod(0o755)
        yield folder
        folder.chmod(0o755)  # whatever the test left, so the folder can be removed


async def _filled_at(path: Path) -> str:
    """A store at `path` holding one conversation 'c' of two turns, closed; the file's digest."""
    async with await SqliteConversationStore.open(path) as store:
        await store.save(Conversation(messages=[*turn(1), *turn(2)], conversation_id='c'), scope='s')
    return digest(path)


async def _open(path: Path) -> None:
    store = await SqliteConversationStore.open(path)
    await store.close()


async def _read_then_write(path: Path) -> None:
    async with await SqliteConversationStore.open(path) as store:
        loaded = await store.load('c')
        assert loaded is not None and len(loaded.messages) == 4, 'the store could not be read'
        loaded.messages.append(user('more'))
        await store.save(loaded)


@pytest.mark.skipif(os.name != 'posix', reason='POSIX file permissions, checked in a forked child')
async def test_read_only_file_permissions(shared_folder: Path) -> None:
    """A store whose file and folder the user may not write is refused when opened, and left as it was;
    no new store can be created in that folder either.

    Without write access to the folder, SQLite cannot create the write-ahead log's files, which even
    a read needs. Checked as a user other than root (`as_another_user`), since root ignores permissions.
    """
    db_path = shared_folder / 'recall.db'
    before = await _filled_at(db_path)
    set_modes(db_path, 0o444, 0o555)
    try:
        with pytest.raises(StoreReadOnly, match=re.escape(f'The store at {db_path} refuses writes')) as raised:
            as_another_user(_open, db_path)
        with pytest.raises(StoreReadOnly, match=re.escape(f'the directory {shared_folder} is not writable')):
            as_another_user(_open, shared_folder / 'new.db')
    finally:
        set_modes(db_path, 0o644, 0o755)
    assert 'fix the permissions' in str(raised.value)
    assert digest(db_path) == before
    assert listing(shared_folder) == ['recall.db']


@pytest.mark.skipif(os.name != 'posix', reason='POSIX file permissions, checked in a forked child')
async def test_read_only_file_in_a_writable_folder_is_read_but_not_written(shared_folder: Path) -> None:
    """The real case that `test_unwritable_file_opens_read_only` fakes: reads work, writes say which file to fix."""
    db_path = shared_folder / 'recall.db'
    before = await _filled_at(db_path)
    give_to_another_user(shared_folder)
    db_path.chmod(0o444)
    with pytest.raises(StoreReadOnly, match=re.escape(f'the file {db_path} is not writable')) as raised:
        as_another_user(_read_then_write, db_path)
    assert 'fix the permissions' in str(raised.value)
    assert digest(db_path) == before


async def test_unwritable_file_opens_read_only(
    filled: SqliteConversationStore, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a user without write permission gets, faked by patching the permission check so it runs on any
    system as any user; the two tests above are the real cases."""
    before = await snapshot(filled)
    await filled.close()

    def all_but_the_file(path: Path) -> bool:
        return path != db_path

    def nothing(path: Path) -> bool:
        return False

    monkeypatch.setattr('temporal_recall.store.sqlite._connection._writable', all_but_the_file)
    async with await SqliteConversationStore.open(db_path) as store:
        assert await snapshot(store) == before
        with pytest.raises(StoreReadOnly, match=f'the file {db_path} is not writable') as raised:
            await store.save(Conversation(messages=turn(3)))
        assert 'fix the permissions' in str(raised.value)
        assert await snapshot(store) == before
    monkeypatch.setattr('temporal_recall.store.sqlite._connection._writable', nothing)
    with pytest.raises(StoreReadOnly, match=r'directory .* is not writable'):
        await SqliteConversationStore.open(db_path.with_name('new.db'))


async def test_locked_beyond_the_busy_timeout(filled: SqliteConversationStore, db_path: Path) -> None:
    before = await snapshot(filled)
    async with await SqliteConversationStore.open(db_path, busy_timeout_ms=50) as impatient:
        loaded = await impatient.load('c')
        assert loaded is not None
        loaded.messages.append(user('more'))
        with closing(sqlite3.connect(db_path, isolation_level=None)) as holder:
            holder.execute('BEGIN IMMEDIATE')
            with pytest.raises(StoreUnavailable, match=r'busy timeout \(50 ms\)'):
                await impatient.save(loaded)
            holder.execute('ROLLBACK')
        assert await snapshot(filled) == before
        await impatient.save(loaded)  # and works once the lock is gone


async def test_closed_store(db_path: Path) -> None:
    store = await SqliteConversationStore.open(db_path)
    await store.close()
    await store.close()
    with pytest.raises(StoreUnavailable, match='is closed'):
        await store.load('c')


async def test_open_store_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for url, expected in [
        ('plain.db', tmp_path / 'plain.db'),
        (f'{tmp_path}/absolute.db', tmp_path / 'absolute.db'),
        ('sqlite:///relative.db', tmp_path / 'relative.db'),
        (f'sqlite:///{tmp_path}/four-slashes.db', tmp_path / 'four-slashes.db'),
        ('sqlite:short.db?busy_timeout_ms=100&synchronous=full', tmp_path / 'short.db'),
        (tmp_path / 'pathlike.db', tmp_path / 'pathlike.db'),
    ]:
        store = await open_store(url)
        try:
            assert store.path.resolve() == expected
            assert await store.list_conversations() == []
        finally:
            await store.close()
    store = await open_store('sqlite:///relative.db?read_only=true')
    try:
        with pytest.raises(StoreReadOnly):
            await store.save(Conversation(messages=turn(1)))
    finally:
        await store.close()


@pytest.mark.parametrize(
    ('url', 'problem'),
    [
        ('postgresql://user@host/db?colour=blue', "option 'colour'"),
        ('postgres://user@host/db?schema=not-an-identifier', 'schema'),
        ('postgresql://user@host/db?pool_max=0', 'pool_max'),
        ('postgresql://user@host/db?pool_min=5&pool_max=2', 'pool_min'),
        ('postgresql://user@host/db?acquire_timeout_ms=soon', 'acquire_timeout_ms'),
        ('postgresql://user@host/db?read_only=maybe', 'read_only'),
        ('mysql://host/db', "scheme 'mysql'"),
        ('sqlite://host/file.db', 'host part'),
        ('sqlite:///', 'names no database file'),
        ('sqlite:///x.db?colour=blue', "option 'colour'"),
        ('sqlite:///x.db?busy_timeout_ms=soon', 'busy_timeout_ms'),
        ('sqlite:///x.db?synchronous=sometimes', 'synchronous'),
        ('sqlite:///x.db?read_only=maybe', 'read_only'),
    ],
)
async def test_bad_store_urls(url: str, problem: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match=problem):
        await open_store(url)
    assert listing(tmp_path) == []


@pytest.mark.parametrize('create', [False, True], ids=['no-store', 'no-folder'])
async def test_a_missing_relative_sqlite_url_shows_where_it_looked_and_the_absolute_form(
    create: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three slashes read like an absolute path; the message says where the relative one points."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(NotADatabase) as missing:
        await open_store('sqlite:///nowhere/x.db', create=create)
    message = str(missing.value)
    assert f'relative to the working directory: {tmp_path / "nowhere" / "x.db"}' in message, message
    assert 'for /nowhere/x.db write sqlite:////nowhere/x.db' in message, message
    assert listing(tmp_path) == []


@pytest.mark.parametrize('create', [False, True], ids=['no-store', 'no-folder'])
async def test_a_missing_store_named_another_way_gets_no_note_about_slashes(
    create: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for url in ('nowhere/x.db', f'sqlite:///{tmp_path}/nowhere/x.db', 'sqlite:nowhere/x.db'):
        with pytest.raises(NotADatabase) as missing:
            await open_store(url, create=create)
        assert 'sqlite:////' not in str(missing.value), url


# --- ids and queries that are not usable text, refused before any driver sees them ------------------

NOT_AN_ID = [
    pytest.param('a\x00b', 'control character U+0000', id='nul'),
    pytest.param('\x00', 'control character U+0000', id='only-nul'),
    pytest.param('tab\tin-id', 'control character U+0009', id='tab'),
    pytest.param('bell\x07', 'control character U+0007', id='bell'),
    pytest.param('del\x7f', 'control character U+007F', id='del'),
    pytest.param('c1\x85', 'control character U+0085', id='c1-control'),
    pytest.param(b'caf\xe9'.decode('utf-8', 'surrogateescape'), 'lone surrogate U+DCE9', id='invalid-utf8'),
    pytest.param('\ud800', 'lone surrogate U+D800', id='lone-surrogate'),
    pytest.param('x' * (MAX_ID_LENGTH + 1), f'longer than {MAX_ID_LENGTH} characters', id='too-long'),
    pytest.param('y' * 10_000, f'longer than {MAX_ID_LENGTH} characters', id='far-too-long'),
]


def _append(conversation_id: str = 'c', scope: str | None = 's', run_id: str | None = None) -> AppendRequest:
    return AppendRequest(
        conversation_id=conversation_id,
        scope=scope,
        idempotency_key='bad-input',
        base_length=0,
        base_hash=None,
        messages=turn(9),
        run_id=run_id,
    )


def _assert_short(error: BaseException, bad: str) -> None:
    """An error quotes at most a bounded prefix of the value, never all of a long one."""
    assert len(str(error)) < 300
    if len(bad) > 100:
        assert bad[:100] not in str(error)
        assert f'{len(bad):,} characters' in str(error)


@pytest.mark.parametrize(('bad', 'problem'), NOT_AN_ID)
async def test_ids_that_are_not_ids_are_refused_before_the_driver(filled_any: AnyStore, bad: str, problem: str) -> None:
    before = await snapshot(filled_any)
    calls = {
        'load': lambda: filled_any.load(bad),
        'load scope': lambda: filled_any.load('c', scope=bad),
        'load_entries': lambda: filled_any.load_entries(bad),
        'save': lambda: filled_any.save(Conversation(messages=turn(3), conversation_id=bad)),
        'save scope': lambda: filled_any.save(Conversation(messages=turn(3), conversation_id='new'), scope=bad),
        'fork to': lambda: filled_any.fork('c', new_conversation_id=bad),
        'fork from': lambda: filled_any.fork(bad, new_conversation_id='f'),
        'delete': lambda: filled_any.delete(bad),
        'delete scope': lambda: filled_any.delete('c', scope=bad),
        'branch from': lambda: filled_any.branch('c', from_entry=bad, expected_revision=None),
        'fork source scope': lambda: filled_any.fork('c', source_scope=bad),
        'list scope': lambda: filled_any.list_conversations(scope=bad),
        'read_entry': lambda: filled_any.read_entry(bad),
        'read_history': lambda: filled_any.read_history(bad),
        'append conversation': lambda: filled_any.append(_append(conversation_id=bad)),
        'append scope': lambda: filled_any.append(_append(scope=bad)),
        'append run': lambda: filled_any.append(_append(run_id=bad)),
        'search target': lambda: filled_any.index_stats(SearchTarget(scope='s', conversation_id=bad)),
        'search run': lambda: filled_any.index_stats(SearchTarget(scope='s', conversation_id='c', run_id=bad)),
        'bodies': lambda: filled_any.get_bodies(bad, ['h']),
    }
    for name, call in calls.items():
        with pytest.raises(InvalidIdentifier, match=re.escape(problem)) as raised:
            await call()
        assert isinstance(raised.value, RecallError), name
        _assert_short(raised.value, bad)
    assert await snapshot(filled_any) == before
    assert (await filled_any.load('c')) is not None  # the store is still usable


@pytest.mark.parametrize(('bad', 'problem'), NOT_AN_ID)
async def test_search_requests_with_bad_ids_are_refused_when_built(
    filled_any: AnyStore, bad: str, problem: str
) -> None:
    for field in ('conversation_id', 'scope', 'run_id', 'exclude_run_id'):
        fields: dict[str, Any] = {'conversation_id': 'c', 'scope': 's', field: bad}
        with pytest.raises(InvalidIdentifier, match=re.escape(problem)) as raised:
            SearchRequest(query='weather', **fields)
        assert f'`{field}`' in str(raised.value)
        _assert_short(raised.value, bad)
    result = await search_index(filled_any, SearchRequest(query='weather', conversation_id='c', scope='s'))
    assert result.hits


@pytest.mark.parametrize(
    ('query', 'problem'),
    [
        ('weather\x00', 'control character U+0000'),
        ('\x1b[31mweather', 'control character U+001B'),
        (b'weather \xff'.decode('utf-8', 'surrogateescape'), 'lone surrogate U+DCFF'),
    ],
)
async def test_queries_that_are_not_text_are_refused(filled_any: AnyStore, query: str, problem: str) -> None:
    with pytest.raises(InvalidQuery, match=re.escape(problem)):
        SearchRequest(query=query, conversation_id='c', scope='s')
    spaced = await search_index(filled_any, SearchRequest(query='the\tweather\r\n', conversation_id='c', scope='s'))
    assert spaced.hits  # tab and line breaks are spacing, not control characters to refuse


async def test_the_longest_id_is_stored_and_found(recall_store: AnyStore) -> None:
    longest = 'é' * MAX_ID_LENGTH  # characters, not bytes: 1,024 bytes of UTF-8
    await recall_store.save(Conversation(messages=turn(1), conversation_id=longest), scope=longest)
    loaded = await recall_store.load(longest, scope=longest)
    assert loaded is not None and len(loaded.messages) == 2
    found = await search_index(recall_store, SearchRequest(query='weather', conversation_id=longest, scope=longest))
    assert found.hits and {hit.conversation_id for hit in found.hits} == {longest}


@pytest.mark.parametrize('given', ['recall.db', Path('recall.db')])
def test_a_sqlite_store_built_from_a_path_points_to_open_store(given: str | Path, tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"await open_store\('recall.db'\)") as raised:
        SqliteConversationStore(given)  # type: ignore[arg-type]
    assert "SqliteConversationStore.open('recall.db')" in str(raised.value)
    with pytest.raises(TypeError, match='takes an opened database, not int'):
        SqliteConversationStore(3)  # type: ignore[arg-type]


def test_a_postgres_store_built_from_a_url_points_to_open_store() -> None:
    from temporal_recall.store import PostgresConversationStore

    url = 'postgresql://recall:secret@db/recall'
    with pytest.raises(TypeError, match=r'await open_store\(url\)') as raised:
        PostgresConversationStore(url)  # type: ignore[arg-type]
    assert 'PostgresConversationStore.open(url)' in str(raised.value)
    assert 'secret' not in str(raised.value)  # a URL may hold a password: it is not echoed
