"""SQLite's dialect: what SQLite spells otherwise than the engine's SQL, and the tables in its spelling.
More in docs/design/store.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from types import MappingProxyType
from typing import Any

from ..sql._migrations import Migration
from ..sql._schema import render
from ..sql._session import Dialect, Session, Statement

__all__ = ('MIGRATIONS', 'SQLITE', 'SqliteDialect')


class SqliteDialect(Dialect):
    """SQLite's spelling of the engine's SQL (see the module notes)."""

    name = 'SQLite'
    supports_array_parameters = False
    supports_join_planning = False
    supports_concurrent_writes = False
    statements_are_round_trips = False
    appends_in_one_call = False

    ddl = MappingProxyType(
        {
            **Dialect.ddl,
            'serial': 'INTEGER PRIMARY KEY AUTOINCREMENT',
            'rowid': 'INTEGER PRIMARY KEY',
            'big': 'INTEGER',
            'blob': 'BLOB',
            'boolean': 'INTEGER',
            'false': '0',
            'clustered': ' WITHOUT ROWID',
            'unix_now': "CAST(strftime('%s', 'now') AS INTEGER)",
        }
    )
    constant_column_defaults = True
    indexes_entry_hashes = True

    greatest = 'max'
    for_update = ''
    join_in_order = 'CROSS JOIN'
    byte_order = ''  # SQLite's default `BINARY` collation already orders by bytes.
    marked_members = ' INDEXED BY conversation_documents_superseded'

    def each(self, param: int, sql_type: str) -> str:
        return f'json_each(${param})'

    def array(self, values: Iterable[Any]) -> Any:
        return json.dumps(list(values))

    def in_array(self, param: int, sql_type: str) -> str:
        return f'IN (SELECT value FROM json_each(${param}))'  # noqa: S608 (a parameter number, no value)

    def in_select(self, select: str) -> str:
        return f'IN ({select})'

    def array_of(self, select: str) -> str:
        return f'(SELECT json_group_array(value) FROM ({select}))'  # noqa: S608

    def read_array(self, value: Any) -> list[Any]:
        return json.loads(value)

    def batch(self, columns: Sequence[tuple[str, str]]) -> str:
        values = ', '.join(f'${index} AS {name}' for index, (name, _) in enumerate(columns, 1))
        return f'(SELECT {values}) AS d'

    def rows_table(self, columns: Sequence[tuple[str, str]], alias: str = 'd', first: int = 1) -> str:
        # One JSON array of rows, each an array of values: SQLite binds no arrays.
        values = ', '.join(f"json_extract(value, '$[{index}]') AS {name}" for index, (name, _) in enumerate(columns))
        return f'(SELECT {values} FROM json_each(${first})) AS {alias}'  # noqa: S608 (fixed names)

    def rows_params(self, rows: Sequence[Sequence[Any]], width: int) -> list[Any]:
        return [json.dumps([list(row) for row in rows])]

    def delete_unreferenced(self, table: str, key: str, referrer: str) -> str:
        # One pass over the subquery: SQLite would run a correlated `NOT EXISTS` once per row.
        return f'DELETE FROM {table} WHERE {key} NOT IN (SELECT {key} FROM {referrer} WHERE {key} IS NOT NULL)'  # noqa: S608

    async def allocate_keys(
        self, session: Session, table: str, column: str, count: int, after: Statement | None = None
    ) -> list[int]:
        if after is not None:
            await session.rows(after[0], *after[1])
        # One writer at a time: continue the AUTOINCREMENT counter, which inserting the keys advances.
        last = await session.value('SELECT seq FROM sqlite_sequence WHERE name = $1', table)
        start = 1 + (0 if last is None else int(last))
        return list(range(start, start + count))

    def reset_keys(self, table: str, column: str, start: int = 1) -> Sequence[str]:
        reset = f"DELETE FROM sqlite_sequence WHERE name = '{table}'"  # noqa: S608 (a fixed table name)
        if start == 1:
            return (reset,)
        return (reset, f"INSERT INTO sqlite_sequence (name, seq) VALUES ('{table}', {int(start) - 1})")  # noqa: S608

    def lock_tables(self, tables: Sequence[str]) -> str | None:
        return None  # A write transaction already keeps every other writer out.

    def lock_tenants(self, *, exclusive: bool) -> str | None:
        return None

    def lock_tenant_in(self, tenant: str) -> str | None:
        return None

    def lock_new_contents(self) -> str | None:
        return None

    def try_lock_merge(self) -> str | None:
        return None


SQLITE = SqliteDialect()

MIGRATIONS: tuple[Migration, ...] = render(SQLITE)
"""Every migration, in version order, as SQLite statements (versions and names: `sql._migrations.RELEASED`)."""
