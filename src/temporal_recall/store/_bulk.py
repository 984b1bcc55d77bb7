"""Set-oriented statements over a batch of rows, written once for both backends.

A batch of rows is how a write inserts entries, postings and memberships, and how a delete counts
down what it releases. The two backends want it differently, and this module is where that
difference lives:

- PostgreSQL: one statement over `unnest` of one array per column, one round trip for the batch
  (a round trip to a server costs far more than the statement).
- SQLite: the same statement once per row (`executemany` on the connection thread, where a call
  into the library is cheap), each row's values bound as scalars.

Callers write the statement once around `batch(dialect, columns)`, the batch as a table named `d`.
Keys a table allocates are taken beforehand with `allocate_keys`, in the order the rows get them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from ._session import Dialect, Session

__all__ = ('allocate_keys', 'batch', 'delete_rows', 'insert_rows', 'run_batch')

Columns = Sequence[tuple[str, str]]
"""`(name, PostgreSQL type)` of each column of a batch, in the order its rows hold the values."""


def batch(dialect: Dialect, columns: Columns) -> str:
    """The batch as a table expression named `d` with these columns (see `run_batch`)."""
    names = ', '.join(name for name, _ in columns)
    if dialect.name == 'sqlite':
        values = ', '.join(f'${index} AS {name}' for index, (name, _) in enumerate(columns, 1))
        return f'(SELECT {values}) AS d'
    arrays = ', '.join(f'${index}::{sql_type}[]' for index, (_, sql_type) in enumerate(columns, 1))
    return f'unnest({arrays}) AS d({names})'


async def run_batch(session: Session, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    """Run `sql` (written around `batch`) over `rows`: once per row on SQLite, once on PostgreSQL."""
    if not rows:
        return
    if session.dialect.name == 'sqlite':
        await session.many(sql, rows)
    else:
        await session.run(sql, *(list(column) for column in zip(*rows, strict=True)))


async def insert_rows(
    session: Session,
    table: str,
    columns: Columns,
    rows: Sequence[Sequence[Any]],
    *,
    order_by: str = '',
    on_conflict: str = '',
) -> None:
    """Insert `rows` into `table`, in their order (on PostgreSQL, in `order_by`'s: the lock order when it matters)."""
    names = ', '.join(name for name, _ in columns)
    if session.dialect.name == 'sqlite':
        values = ', '.join(f'${index}' for index in range(1, len(columns) + 1))
        sql = f'INSERT INTO {table} ({names}) VALUES ({values}) {on_conflict}'  # noqa: S608
    else:
        order = f'ORDER BY {order_by}' if order_by else ''
        sql = f'INSERT INTO {table} ({names}) SELECT * FROM {batch(session.dialect, columns)} {order} {on_conflict}'  # noqa: S608
    await run_batch(session, sql, rows)


async def delete_rows(
    session: Session, table: str, columns: Columns, rows: Sequence[Sequence[Any]], *, where: str = ''
) -> None:
    """Delete the rows of `table` whose `columns` equal one of `rows` (a key per row) and that meet `where`."""
    also = f' AND {where}' if where else ''
    if session.dialect.name == 'sqlite':
        match = ' AND '.join(f'{name} = ${index}' for index, (name, _) in enumerate(columns, 1))
        sql = f'DELETE FROM {table} WHERE {match}{also}'  # noqa: S608 (fixed names; values are parameters)
    else:
        match = ' AND '.join(f't.{name} = d.{name}' for name, _ in columns)
        sql = f'DELETE FROM {table} t USING {batch(session.dialect, columns)} WHERE {match}{also}'  # noqa: S608
    await run_batch(session, sql, rows)


async def allocate_keys(session: Session, table: Literal['entries', 'documents'], count: int) -> list[int]:
    """`count` fresh keys of `table`'s generated key, ascending: rows inserted with them keep allocation order.

    PostgreSQL draws them from the identity's sequence (concurrent writers get distinct keys);
    SQLite, with one writer, continues its AUTOINCREMENT counter, which inserting them advances.
    """
    if count == 0:
        return []
    if session.dialect.name == 'sqlite':
        last = await session.value('SELECT seq FROM sqlite_sequence WHERE name = $1', table)
        start = 1 + (0 if last is None else int(last))
        return list(range(start, start + count))
    column = 'entry_key' if table == 'entries' else 'doc_id'
    rows = await session.rows(
        'SELECT nextval(pg_get_serial_sequence($1, $2)) FROM generate_series(1, $3)', table, column, count
    )
    return sorted(int(row[0]) for row in rows)
