"""Applying migrations, written once: the recorded version's rule and the bookkeeping of each missing migration.

Runs on a `Session` inside the one transaction a driver's opener started and serialised against
other openers (see `sqlite._opener`, `postgres._opener`); the list itself is `sql._migrations`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime

from .index._rebuild import rebuild_index
from .sql._migrations import MIGRATIONS_TABLE, Migration, pending, reindex_progress
from .sql._session import Session

__all__ = ('apply', 'recorded_version')


async def recorded_version(
    session: Session, tables: Iterable[str], *, migrations_table: str, not_a_store: Callable[[], Exception]
) -> int:
    """The version recorded in a database holding `tables`: 0 if it holds none, and `not_a_store()` raised if
    it holds tables but no `schema_migrations` (someone else's). Reads only."""
    names = set(tables)
    if not names:
        return 0
    if 'schema_migrations' not in names:
        raise not_a_store()
    return int(await session.value(f'SELECT max(version) FROM {migrations_table}') or 0)  # noqa: S608 (an identifier)


async def apply(session: Session, migrations: Sequence[Migration], recorded: int, *, store: str) -> None:
    """Apply the migrations a store at version `recorded` lacks, recording each, in the caller's transaction.

    The index is rebuilt once, after the last migration's statements, if any of them asks for it: a
    rebuild writes the latest index layout, which an earlier migration's tables do not have yet. A new
    store (`recorded` 0) has nothing to rebuild: its rebuild only records the analyzer, and logs nothing.
    """
    missing = pending(migrations, recorded)
    if not missing:
        return
    await session.run(MIGRATIONS_TABLE)
    for migration in missing:
        for statement in migration.statements:
            await session.run(statement)
    reindexing = [migration for migration in missing if migration.reindex]
    if reindexing:
        await rebuild_index(session, reindex_progress(store, reindexing) if recorded else None)
    for migration in missing:
        await session.run(
            'INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)',
            migration.version,
            migration.name,
            datetime.now(UTC).isoformat(),
        )
