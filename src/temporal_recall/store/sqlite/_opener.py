"""Opening a SQLite store: check the file and the recorded schema version, then apply missing migrations.
More in docs/design/store.md.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

from temporal_recall.errors import NotADatabase, SchemaTooNew, StoreReadOnly, StoreUnavailable

from .._migrate import apply, recorded_version
from ..sql._migrations import Migration, latest_version
from ..sql._session import Session
from . import _dialect as sql
from ._connection import SYNCHRONOUS, Database, Synchronous, check_file, translate_error
from ._thread import RecallConnection

__all__ = ('connect',)


async def _recorded_version(session: Session, path: Path) -> int:
    """The schema version recorded in the database, 0 for an empty one. Reads only."""
    return await recorded_version(
        session,
        [row[0] for row in await session.rows("SELECT name FROM sqlite_master WHERE type = 'table'")],
        migrations_table='schema_migrations',
        not_a_store=lambda: NotADatabase(
            f'{path} is a SQLite database but not a temporal-recall store (it has tables but no '
            'schema_migrations table). Pass the path of a temporal-recall store, or a new path.'
        ),
    )


def _too_new(path: Path, recorded: int, known: int) -> SchemaTooNew:
    return SchemaTooNew(
        f'The store at {path} has schema version {recorded}, but this temporal-recall knows versions '
        f'up to {known}. It was left untouched; upgrade temporal-recall to open it.'
    )


async def _migrate(db: Database, migrations: Sequence[Migration]) -> None:
    known = latest_version(migrations)

    async def body(session: Session) -> None:
        # Again, under the write lock: another process may have migrated.
        recorded = await _recorded_version(session, db.path)
        if recorded > known:
            raise _too_new(db.path, recorded, known)
        await apply(session, migrations, recorded, store=str(db.path))

    await db.run_write(body)


CACHE_KIB = 65_536
"""The page cache of a store's connection, 64 MiB rather than SQLite's default 2 MiB. A write inserts
postings all over the index (at the end of each of its terms' lists), so with a cache smaller than
those hot pages nearly every insert reads a page back from the OS (docs/benchmarks/history.md has the
measurement). SQLite allocates the cache as pages are used, so a small store takes only what it needs."""


async def _first_look(session: Session, path: Path) -> int:
    await session.run('PRAGMA foreign_keys = ON')
    await session.run(f'PRAGMA cache_size = -{CACHE_KIB}')
    return await _recorded_version(session, path)


CHECKPOINT_PAGES = 16_384
"""Write-ahead log pages after which a commit copies them into the database (SQLite's default: 1,000).

An indexed write rewrites the tail block of every term it holds, each on a page of its own in a large
store: a large append dirties thousands of pages, so at the default every commit is followed by a
checkpoint that writes them all into the database file again, the commonest terms' tails included,
which the next append rewrites anyway. With a checkpoint every `CHECKPOINT_PAGES` pages a hot page is
copied once per checkpoint instead of once per commit, at the price of a longer pause at each
checkpoint (docs/benchmarks/history.md has the measurement). Durability does not change: a commit is as
durable as `synchronous` makes its frames in the log, and a reopened store reads the log whatever its
length."""

_LOG_LIMIT = 4096 * CHECKPOINT_PAGES
"""Bytes the log file is cut back to after a checkpoint, if a long reader let it grow past that."""


async def _use_wal(session: Session, synchronous: Synchronous) -> None:
    await session.run('PRAGMA journal_mode = WAL')
    await session.run(SYNCHRONOUS[synchronous])
    await session.run(f'PRAGMA wal_autocheckpoint = {CHECKPOINT_PAGES}')
    await session.run(f'PRAGMA journal_size_limit = {_LOG_LIMIT}')


async def connect(
    path: Path,
    *,
    busy_timeout_ms: int,
    synchronous: Synchronous,
    read_only: bool,
    migrations: Sequence[Migration] | None = None,
) -> Database:
    """Open (creating or migrating if needed) the store database at `path`.

    The order matters: the file header and the recorded schema version are checked with reads only,
    so a foreign or newer database is refused before WAL mode, a migration or anything else writes.
    """
    if busy_timeout_ms < 0:
        raise ValueError('busy_timeout_ms must not be negative.')
    if synchronous not in ('NORMAL', 'FULL'):
        raise ValueError("synchronous must be 'NORMAL' or 'FULL'.")
    migrations = sql.MIGRATIONS if migrations is None else migrations
    if not path.parent.is_dir():
        # Checked here rather than left to SQLite: a failed aiosqlite.connect leaves its worker
        # thread behind. A missing folder is a wrong setting, not an outage: nothing retries it.
        raise NotADatabase(
            f'The store at {path} cannot be used: the directory {path.parent} does not exist. '
            'Create it, or point the store URL at an existing directory.'
        )
    read_only_reason = check_file(path, read_only=read_only)
    read_only = read_only or read_only_reason is not None
    uri = f'file:{quote(str(path))}?mode={"ro" if read_only else "rwc"}'
    try:
        # `timeout` is sqlite3's busy timeout: how long a statement waits for another writer's lock.
        # A daemon connection thread, closed at exit if the store was not: see `sqlite._thread`.
        connection = await RecallConnection(uri, uri=True, isolation_level=None, timeout=busy_timeout_ms / 1000)
    except sqlite3.Error as error:
        raise translate_error(error, path, busy_timeout_ms) or error from error
    db = Database(
        connection, path, busy_timeout_ms=busy_timeout_ms, read_only=read_only, read_only_reason=read_only_reason
    )
    try:
        try:
            recorded = await db.run_read(lambda session: _first_look(session, path), snapshot=False)
        except StoreUnavailable as error:
            if read_only_reason is None:
                raise
            raise StoreReadOnly(
                f'The store at {path} cannot be opened: {read_only_reason}, and SQLite needs to create the '
                '-wal and -shm files next to a WAL database even to read it. Make the directory writable.'
            ) from error
        known = latest_version(migrations)
        if recorded > known:
            raise _too_new(path, recorded, known)
        if read_only:
            if recorded < known:
                raise StoreReadOnly(
                    f'The store at {path} has schema version {recorded} and needs migrating to {known}, '
                    'which read-only access cannot do. Open it once with write access (without '
                    'read_only=True, with permission to write the file and its directory).'
                )
            return db
        await db.run_read(lambda session: _use_wal(session, synchronous), snapshot=False)
        if recorded < known:
            await _migrate(db, migrations)
    except BaseException:
        await db.close()
        raise
    return db
