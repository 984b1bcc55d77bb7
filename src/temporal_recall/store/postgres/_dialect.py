"""PostgreSQL's dialect: the engine's SQL as written, the tables in PostgreSQL's spelling, and what SQL
has no common spelling for (sequences, table locks). More in docs/design/store.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType

from ..sql._bulk import numbered_from
from ..sql._migrations import Migration
from ..sql._schema import CONVERSATION_ID_UNIQUE, render
from ..sql._session import Dialect, Session, Statement

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

    async def allocate_keys(
        self, session: Session, table: str, column: str, count: int, after: Statement | None = None
    ) -> list[int]:
        if after is None:
            rows = await session.rows(
                'SELECT nextval(pg_get_serial_sequence($1, $2)) FROM generate_series(1, $3)', table, column, count
            )
            return sorted(int(row[0]) for row in rows)
        # The keys are computed from the row that counts `after`'s rows (a subquery each row of `done`
        # runs again), so they come after all of them: `after`'s volatile calls are kept and run in order.
        keys = await session.value(
            'SELECT ARRAY(SELECT nextval(pg_get_serial_sequence($1, $2)) FROM generate_series(1, $3 + 0 * done.n)) '  # noqa: S608
            f'FROM (SELECT count(*) AS n FROM ({numbered_from(after[0], 4)}) AS locks) AS done',
            table,
            column,
            count,
            *after[1],
        )
        return sorted(int(key) for key in keys)

    def reset_keys(self, table: str, column: str, start: int = 1) -> Sequence[str]:
        return (f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), {int(start)}, false)",)

    def lock_tables(self, tables: Sequence[str]) -> str | None:
        return f'LOCK TABLE {", ".join(tables)} IN EXCLUSIVE MODE'

    def lock_tenants(self, *, exclusive: bool) -> str | None:
        return f'SELECT {_lock_tenant("t", exclusive=exclusive)} FROM unnest($1::bigint[]) AS t'  # noqa: S608

    def lock_tenant_in(self, tenant: str) -> str | None:
        return _lock_tenant(tenant, exclusive=False)

    def lock_new_contents(self) -> str | None:
        # Evaluated in the arrays' order, which the caller sorted by key: one order for every writer.
        return (
            f'SELECT pg_advisory_xact_lock({_CONTENTS}, x.k) FROM unnest($2::bytea[], $3::int[]) AS x(h, k) '  # noqa: S608
            'WHERE NOT EXISTS (SELECT 1 FROM documents d WHERE d.tenant_id = $1 AND d.content_hash = x.h)'
        )

    def try_lock_merge(self) -> str | None:
        return f'SELECT pg_try_advisory_xact_lock({_MERGES}, {_KEY.format("$1::bigint")})'


_TENANTS, _CONTENTS, _MERGES = (
    f"hashtext(current_schema() || '/temporal_recall/{space}')" for space in ('tenants', 'contents', 'merges')
)
"""The advisory lock spaces (the first key of two) of the store's tenant, content and merge locks, one
set per schema (the store's, the connections' `search_path`). Advisory locks belong to the whole
database: with fixed spaces, stores in two schemas of one database waited for each other's locks
on equal tenant ids, and one's merge try-lock made the other's merge step aside."""

_KEY = 'CAST({} % 2147483647 AS int)'
"""A tenant id as the second key of an advisory lock (a collision only makes two tenants share a lock)."""


def _lock_tenant(tenant: str, *, exclusive: bool) -> str:
    function = 'pg_advisory_xact_lock' if exclusive else 'pg_advisory_xact_lock_shared'
    return f'{function}({_TENANTS}, {_KEY.format(tenant)})'


POSTGRESQL = PostgresDialect()

MIGRATIONS: tuple[Migration, ...] = render(POSTGRESQL)
"""Every migration, in version order, as PostgreSQL statements (versions and names: `sql._migrations.RELEASED`)."""
