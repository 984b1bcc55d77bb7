"""PostgreSQL's dialect: the engine's SQL as written, the tables in PostgreSQL's spelling, and what SQL
has no common spelling for (sequences, table locks). More in docs/store.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType

from ..sql._migrations import Migration
from ..sql._schema import CONVERSATION_ID_UNIQUE, render
from ..sql._session import Dialect, Session

__all__ = ('MIGRATIONS', 'POSTGRESQL', 'PostgresDialect')


class PostgresDialect(Dialect):
    """PostgreSQL: the `Dialect` defaults, which are its spelling, plus its sequences and table locks."""

    name = 'PostgreSQL'
    ddl = MappingProxyType(
        {
            **Dialect.ddl,
            'postings_include': ' INCLUDE (term_frequency, length)',
            'conversation_id_unique': f'CONSTRAINT {CONVERSATION_ID_UNIQUE} UNIQUE',
        }
    )

    async def allocate_keys(self, session: Session, table: str, column: str, count: int) -> list[int]:
        rows = await session.rows(
            'SELECT nextval(pg_get_serial_sequence($1, $2)) FROM generate_series(1, $3)', table, column, count
        )
        return sorted(int(row[0]) for row in rows)

    def reset_keys(self, table: str, column: str) -> str:
        return f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), 1, false)"

    def lock_tables(self, tables: Sequence[str]) -> str | None:
        return f'LOCK TABLE {", ".join(tables)} IN EXCLUSIVE MODE'


POSTGRESQL = PostgresDialect()

MIGRATIONS: tuple[Migration, ...] = render(POSTGRESQL)
"""Every migration, in version order, as PostgreSQL statements (versions and names: `sql._migrations.RELEASED`)."""
