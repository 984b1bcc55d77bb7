"""Opening a PostgreSQL store: check the recorded schema version, then apply missing migrations safely.

The order matters, as for SQLite: the recorded version is read with plain reads first, so a schema
written by a newer temporal-recall is refused (`SchemaTooNew`) before anything is locked, created or
changed, and a schema holding someone else's tables is refused as not a store (`NotADatabase`).

Migrating runs in one transaction holding a transaction-scoped advisory lock derived from the schema
name, and re-reads the version under it. Two workers starting together against an empty database
therefore queue on the lock: the first creates the schema and its tables, the second then finds
them recorded and applies nothing. A migration that fails rolls back entirely, leaving the previous
version (and, for a new store, no schema at all).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime

from asyncpg import exceptions as pg

from temporal_recall.errors import NotADatabase, SchemaTooNew, StoreReadOnly

from . import _postgres_schema as schema
from ._membership import rebuild_index
from ._migrations import Migration, reindex_progress
from ._postgres_db import Conn, Database, PostgresSession, create_pool, quote_ident
from ._postgres_url import PostgresOptions

__all__ = ('migration_lock_key', 'open_database', 'recorded_version')


def migration_lock_key(schema_name: str) -> int:
    """The advisory lock key migrations of `schema_name` take: stable across processes and versions."""
    digest = hashlib.sha256(f'temporal-recall migrate {schema_name}'.encode()).digest()
    return int.from_bytes(digest[:8], 'big', signed=True)


async def recorded_version(conn: Conn, options: PostgresOptions) -> int:
    """The schema version recorded in the store's schema, 0 when the schema is missing or empty. Reads only."""
    tables: list[str] = [
        row[0]
        for row in await conn.fetch(
            'SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace '
            "WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f')",
            options.schema,
        )
    ]
    if not tables:
        return 0
    if 'schema_migrations' not in tables:
        raise NotADatabase(
            f'The PostgreSQL schema {options.schema!r} at {options.display} holds tables but no schema_migrations '
            'table, so it is not a temporal-recall store; it was left untouched. Choose another schema with '
            '?schema=name in the store URL.'
        )
    version = await conn.fetchval(f'SELECT max(version) FROM {quote_ident(options.schema)}.schema_migrations')  # noqa: S608 (validated identifier)
    return int(version or 0)


def _too_new(options: PostgresOptions, recorded: int, known: int) -> SchemaTooNew:
    return SchemaTooNew(
        f'The PostgreSQL store at {options.display} (schema {options.schema!r}) has schema version {recorded}, '
        f'but this temporal-recall knows versions up to {known}. It was left untouched; upgrade temporal-recall '
        'to open it.'
    )


async def _migrate(db: Database, migrations: Sequence[Migration]) -> None:
    options = db.options
    known = schema.latest_version(migrations)
    quoted = quote_ident(options.schema)

    async def body(conn: Conn) -> None:
        await conn.execute('SELECT pg_advisory_xact_lock($1)', migration_lock_key(options.schema))
        recorded = await recorded_version(conn, options)  # again, under the lock: another worker may have migrated
        if recorded > known:
            raise _too_new(options, recorded, known)
        if recorded == known:
            return
        try:
            await conn.execute(f'CREATE SCHEMA IF NOT EXISTS {quoted}')
        except pg.InsufficientPrivilegeError as error:
            raise StoreReadOnly(
                f'Cannot create the schema {options.schema!r} at {options.display}: {error}. Create it once as '
                f'an owner (CREATE SCHEMA {quoted} AUTHORIZATION <store user>) or grant CREATE on the database.'
            ) from error
        await conn.execute(f'SET LOCAL search_path TO {quoted}')
        await conn.execute(schema.MIGRATIONS_TABLE)
        for migration in schema.pending(migrations, recorded):
            for statement in migration.statements:
                await conn.execute(statement)
            if migration.reindex:
                await rebuild_index(PostgresSession(conn), reindex_progress(options.display, migration))
            await conn.execute(
                'INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)',
                migration.version,
                migration.name,
                datetime.now(UTC).isoformat(),
            )

    await db.write(body)


async def open_database(options: PostgresOptions, *, migrations: Sequence[Migration] | None = None) -> Database:
    """Connect a pool for `options` and bring the store's schema to the latest version.

    Raises:
        SchemaTooNew: A newer temporal-recall wrote the schema; nothing was changed.
        NotADatabase: No such database, or the schema holds tables that are not a store.
        StoreReadOnly: `read_only=true` on a schema that needs migrating, or no right to create it.
        StoreUnavailable: The server cannot be reached.
        ConfigurationError: The server refused the login.
    """
    migrations = schema.MIGRATIONS if migrations is None else migrations
    pool = await create_pool(options, server_settings={})
    db = Database(pool, options)
    try:
        recorded = await db.read(lambda conn: recorded_version(conn, options), snapshot=False)
        known = schema.latest_version(migrations)
        if recorded > known:
            raise _too_new(options, recorded, known)
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
