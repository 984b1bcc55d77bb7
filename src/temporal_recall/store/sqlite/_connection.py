"""One aiosqlite connection with the store's opening checks, transactions and error translation.

More in docs/design/store.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import re
import sqlite3
from collections.abc import AsyncGenerator, Callable, Coroutine, Generator, Iterable, Sequence
from concurrent.futures import Future
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

import aiosqlite

from temporal_recall.errors import NotADatabase, StoreError, StoreReadOnly, StoreUnavailable

from ..sql._session import Dialect, Session
from ._dialect import SQLITE

__all__ = (
    'SYNCHRONOUS',
    'Database',
    'SqliteSession',
    'Synchronous',
    'check_file',
    'sqlite_spelling',
    'translate_error',
)

Synchronous = Literal['NORMAL', 'FULL']

SYNCHRONOUS: dict[str, str] = {
    # NORMAL is crash-safe in WAL mode: a crash or kill never corrupts the database or tears a
    # transaction; only the last transactions before a power loss or OS crash may be rolled back.
    'NORMAL': 'PRAGMA synchronous = NORMAL',
    # FULL also makes every committed transaction survive power loss, at one fsync per commit.
    'FULL': 'PRAGMA synchronous = FULL',
}


class Database:
    """An open store database, the SQLite driver's `Backend`: `run_read` / `run_write` hold the lock.

    Each transaction runs whole on the connection's own thread, driven by `_drive`: engine code is
    ordinary async code written against `Session`, and on that thread its awaits never suspend, so a
    transaction of any number of statements costs one thread hop (through aiosqlite each statement
    would be a round trip to the thread and back, which costs more than the statement).
    """

    def __init__(
        self,
        connection: aiosqlite.Connection,
        path: Path,
        *,
        busy_timeout_ms: int,
        read_only: bool,
        read_only_reason: str | None = None,
    ) -> None:
        self._connection: aiosqlite.Connection | None = connection
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        self.read_only = read_only
        self.read_only_reason = read_only_reason
        """Why a store opened for writing is read-only (file or directory permissions), if it is."""
        self._lock = asyncio.Lock()

    @property
    def connection(self) -> aiosqlite.Connection:
        if self._connection is None:
            raise StoreUnavailable(
                f'The store at {self.path} is closed; open it again with SqliteConversationStore.open().'
            )
        return self._connection

    async def close(self) -> None:
        async with self._lock:
            connection, self._connection = self._connection, None
            if connection is not None:
                await connection.close()

    @property
    def dialect(self) -> Dialect:
        return SQLITE

    async def run_read(self, body: Callable[[Session], Coroutine[Any, Any, _T]], *, snapshot: bool = True) -> _T:
        """`Backend.run_read`: the whole read on the connection thread, one thread hop (see the class notes)."""
        async with self._lock, self._translated():
            connection = self.connection
            run = _read_snapshot if snapshot else _drive_plain
            return cast(_T, await connection._execute(run, connection._conn, body))  # pyright: ignore[reportPrivateUsage]

    async def run_write(
        self,
        body: Callable[[Session], Coroutine[Any, Any, _T]],
        *,
        retry: Callable[[BaseException], bool] | None = None,
        autocommit: bool = False,
    ) -> _T:
        """`Backend.run_write`: one `BEGIN IMMEDIATE` transaction on the connection thread, one thread hop.

        SQLite has one writer at a time, so there is no conflict to retry: `retry` is accepted for
        the protocol and never consulted; nor is `autocommit` (a transaction costs no round trip).
        """
        async with self._lock, self._translated():
            if self.read_only:
                raise self.read_only_error()
            connection = self.connection
            return cast(_T, await connection._execute(_write_transaction, connection._conn, body))  # pyright: ignore[reportPrivateUsage]

    @asynccontextmanager
    async def _translated(self) -> AsyncGenerator[None]:
        try:
            yield
        except sqlite3.Error as error:
            translated = translate_error(error, self.path, self.busy_timeout_ms)
            if translated is None:
                raise
            raise translated from error

    def read_only_error(self) -> StoreReadOnly:
        if self.read_only_reason is not None:
            return StoreReadOnly(
                f'The store at {self.path} is read-only: {self.read_only_reason}. Writes need write access to '
                'the database file and its directory (SQLite creates -wal and -shm files next to it); fix the '
                'permissions or the mount.'
            )
        return StoreReadOnly(
            f'The store at {self.path} was opened with read_only=True; open it without read_only=True to write.'
        )


_T = TypeVar('_T')


class _Ready:
    """An awaitable that is already done: `await` returns the value without suspending."""

    __slots__ = ('value',)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __await__(self) -> Generator[Any, None, Any]:
        return self.value
        yield  # pragma: no cover - makes this a generator that finishes at once


@functools.lru_cache(maxsize=1024)
def sqlite_spelling(sql: str) -> str:
    """`sql` with SQLite's spelling of numbered placeholders (`$1` -> `?1`), computed once per statement."""
    return _PLACEHOLDER.sub(r'?\1', sql)


_PLACEHOLDER = re.compile(r'\$(\d+)')


class SqliteSession:
    """The engine's `Session` on the connection thread: statements run synchronously, awaits never suspend."""

    __slots__ = ('_connection',)

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    @property
    def dialect(self) -> Dialect:
        return SQLITE

    def rows(self, sql: str, *params: Any) -> _Ready:
        return _Ready(self._connection.execute(sqlite_spelling(sql), params).fetchall())

    def one(self, sql: str, *params: Any) -> _Ready:
        return _Ready(self._connection.execute(sqlite_spelling(sql), params).fetchone())

    def value(self, sql: str, *params: Any) -> _Ready:
        row = self._connection.execute(sqlite_spelling(sql), params).fetchone()
        return _Ready(None if row is None else row[0])

    def run(self, sql: str, *params: Any) -> _Ready:
        self._connection.execute(sqlite_spelling(sql), params)
        return _Ready(None)

    def many(self, sql: str, rows: Iterable[Sequence[Any]]) -> _Ready:
        self._connection.executemany(sqlite_spelling(sql), rows)
        return _Ready(None)

    def finished(self, work: Future[_T]) -> _Ready:
        return _Ready(work.result())  # The connection thread waits: its awaits never suspend.


def _drive_plain(connection: sqlite3.Connection, body: Callable[[Any], Coroutine[Any, Any, Any]]) -> Any:
    return _drive(body, connection)


def _drive(reader: Callable[[Any], Coroutine[Any, Any, Any]], connection: sqlite3.Connection) -> Any:
    coroutine = reader(SqliteSession(connection))
    try:
        coroutine.send(None)
    except StopIteration as finished:
        return finished.value
    coroutine.close()
    raise RuntimeError('Store code awaited something other than the database; it cannot run on the connection thread.')


def _write_transaction(connection: sqlite3.Connection, writer: Callable[[Any], Coroutine[Any, Any, Any]]) -> Any:
    if connection.in_transaction:
        connection.execute('ROLLBACK')
    connection.execute('BEGIN IMMEDIATE')
    try:
        result = _drive(writer, connection)
        connection.execute('COMMIT')
        return result
    finally:
        if connection.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                connection.execute('ROLLBACK')


def _read_snapshot(connection: sqlite3.Connection, reader: Callable[[Any], Coroutine[Any, Any, Any]]) -> Any:
    if connection.in_transaction:  # Left open by a task cancelled mid-rollback.
        connection.execute('ROLLBACK')
    connection.execute('BEGIN')
    try:
        return _drive(reader, connection)
    finally:
        if connection.in_transaction:
            connection.execute('ROLLBACK')


def translate_error(error: sqlite3.Error, path: Path, busy_timeout_ms: int) -> StoreError | None:
    """The store error a SQLite error means, or `None` for errors that indicate a bug."""
    text = str(error).lower()
    if 'locked' in text or 'busy' in text:
        return StoreUnavailable(
            f'The store at {path} stayed locked by another writer for longer than the busy timeout '
            f'({busy_timeout_ms} ms). Retry later, or raise busy_timeout_ms.'
        )
    if 'readonly' in text or 'read-only' in text:
        return StoreReadOnly(
            f'The store at {path} refuses writes ({error}). Writes need write access to the database '
            'file and its directory (SQLite creates -wal and -shm files next to it); fix the '
            'permissions or the mount.'
        )
    if 'not a database' in text:
        return NotADatabase(
            f'{path} is not a SQLite database (SQLite reports {error!s}). '
            'Pass the path of a temporal-recall store, or a new path to create one.'
        )
    if 'malformed' in text:
        return NotADatabase(f'{path} is not a temporal-recall store: SQLite reports {error!s}.')
    if 'unable to open' in text or 'disk i/o' in text or 'disk is full' in text:
        return StoreUnavailable(
            f'The store at {path} cannot be used: SQLite reports {error!s}. Check that the directory '
            'exists, is writable and has free space.'
        )
    return None


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK)


def check_file(path: Path, *, read_only: bool) -> str | None:
    """Refuse a path that cannot hold a store, from its metadata alone; never open the file.

    Returns why a store opened for writing can only be read (permissions), or `None`.

    Only `stat` and `access` are used here: POSIX advisory locks belong to the process, and closing
    *any* descriptor of the database file drops every lock this process's SQLite connections hold on
    it (SQLite's "How To Corrupt An SQLite Database File", first item). Another process could then
    take itself for the last connection, checkpoint and delete the write-ahead log, and committed
    writes would be lost. Whether the file's contents are a SQLite database is SQLite's to say, on
    the connection's first read (`translate_error` turns its "file is not a database" into
    `NotADatabase`), which happens before anything is written.
    """
    if path.is_dir():
        raise NotADatabase(f'{path} is a directory, not a temporal-recall store. Pass the path of a database file.')
    folder = path.parent if str(path.parent) else Path('.')
    if not path.exists():
        if read_only:
            raise NotADatabase(f'There is no store at {path} to open read-only.')
        if folder.is_dir() and not _writable(folder):
            raise StoreReadOnly(
                f'Cannot create a store at {path}: the directory {folder} is not writable. '
                'Choose a writable location or fix the permissions.'
            )
        return None
    if read_only:
        return None
    if not _writable(path):
        return f'the file {path} is not writable'
    if not _writable(folder):
        return f'its directory {folder} is not writable'
    return None


if TYPE_CHECKING:
    from ..sql._session import Backend

    _BACKEND: type[Backend] = Database  # pyright checks that the database is the engine's `Backend`
