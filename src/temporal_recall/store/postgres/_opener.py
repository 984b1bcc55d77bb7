"""Opening a PostgreSQL store: check the recorded schema version, then apply missing migrations safely.
More in docs/design/store.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from asyncpg import exceptions as pg

from temporal_recall.errors import NoStore, NotADatabase, SchemaTooNew, StoreReadOnly

from .._migrate import apply
from .._migrate import recorded_version as _recorded_version
from ..sql._migrations import Migration, latest_version
from ..sql._session import Session
from . import _dialect as sql
from ._connection import Database, create_pool, quote_ident
from ._url import PostgresOptions

__all__ = ('migration_lock_key', 'open_database', 'recorded_version')


def migration_lock_key(schema_name: str) -> int:
    """The advisory lock key migrations of `schema_name` take: stable across processes and versions."""
    digest = hashlib.sha256(f'temporal-recall migrate {schema_name}'.encode()).digest()
    return int.from_bytes(digest[:8], 'big', signed=True)


async def recorded_version(session: Session, options: PostgresOptions) -> int:
    """The schema version recorded in the store's schema, 0 when the schema is missing or empty. Reads only."""
    tables = await session.rows(
        'SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace '
        "WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f')",
        options.schema,
    )
    return await _recorded_version(
        session,
        [row[0] for row in tables],
        migrations_table=f'{quote_ident(options.schema)}.schema_migrations',
        not_a_store=lambda: NotADatabase(
            f'The PostgreSQL schema {options.schema!r} at {options.display} holds tables but no schema_migrations '
            'table, so it is not a temporal-recall store; it was left untouched. Choose another schema with '
            '?schema=name in the store URL.'
        ),
    )


def _too_new(options: PostgresOptions, recorded: int, known: int) -> SchemaTooNew:
    return SchemaTooNew(
        f'The PostgreSQL store at {options.display} (schema {options.schema!r}) has schema version {recorded}, '
        f'but this temporal-recall knows versions up to {known}. It was left untouched; upgrade temporal-recall '
        'to open it.'
    )


async def _migrate(db: Database, migrations: Sequence[Migration]) -> None:
    options = db.options
    known = latest_version(migrations)
    quoted = quote_ident(options.schema)

    async def body(session: Session) -> None:
        await session.run('SELECT pg_advisory_xact_lock($1)', migration_lock_key(options.schema))
        recorded = await recorded_version(session, options)  # again, under the lock: another worker may have migrated
        if recorded > known:
            raise _too_new(options, recorded, known)
        if recorded == known:
            return
        try:
            await session.run(f'CREATE SCHEMA IF NOT EXISTS {quoted}')
        except pg.InsufficientPrivilegeError as error:
            raise StoreReadOnly(
                f'Cannot create the schema {options.schema!r} at {options.display}: {error}. Create it once as '
                f'an owner (CREATE SCHEMA {quoted} AUTHORIZATION <store user>) or grant CREATE on the database.'
            ) from error
        await session.run(f'SET LOCAL search_path TO {quoted}')
        await apply(session, migrations, recorded, store=options.display)

    await db.run_write(body)


async def open_database(options: PostgresOptions, *, migrations: Sequence[Migration] | None = None) -> Database:
    """Connect a pool for `options` and bring the store's schema to the latest version.

    Raises:
        SchemaTooNew: A newer temporal-recall wrote the schema; nothing was changed.
        NotADatabase: No such database, or the schema holds tables that are not a store.
        StoreReadOnly: `read_only=true` on a schema that needs migrating, or no right to create it.
        StoreUnavailable: The server cannot be reached.
        ConfigurationError: The server refused the login.
    """
    migrations = sql.MIGRATIONS if migrations is None else migrations
    pool = await create_pool(options, server_settings={})
    db = Database(pool, options)
    try:
        recorded = await db.run_read(lambda session: recorded_version(session, options), snapshot=False)
        known = latest_version(migrations)
        if recorded > known:
            raise _too_new(options, recorded, known)
        if recorded == 0 and not options.create:
            raise NoStore(f'in the PostgreSQL schema {options.schema!r} at {options.display}')
        if recorded < known:
            if options.read_only:
                raise StoreReadOnly(
                    f'The PostgreSQL store at {options.display} (schema {options.schema!r}) has schema version '
                    f'{recorded} and needs migrating to {known}, which read_only=true cannot do. Open it once '
                    'without read_only.'
                )
            await _migrate(db, migrations)
    except BaseException:
        await db.close()
        raise
    return db
