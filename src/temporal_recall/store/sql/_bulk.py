"""Set-oriented statements over a batch of rows, written once for every backend. More in docs/design/store.md."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ._session import Dialect, Row, Session, Statement

__all__ = (
    'CHUNK',
    'Tail',
    'allocate_keys',
    'delete_rows',
    'insert_returning',
    'insert_rows',
    'intern',
    'run_batch',
    'select_batch',
)

CHUNK = 5000
"""The most values one statement takes in an array parameter."""

Columns = Sequence[tuple[str, str]]
"""`(name, PostgreSQL type)` of each column of a batch, in the order its rows hold the values."""


async def run_batch(session: Session, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    """Run `sql` (written around `Dialect.batch`) over `rows`: once, or once per row (see the module notes)."""
    if not rows:
        return
    if session.dialect.supports_array_parameters:
        await session.run(sql, *(list(column) for column in zip(*rows, strict=True)))
    else:
        await session.many(sql, rows)


async def select_batch(session: Session, sql: str, rows: Sequence[Sequence[Any]]) -> list[Row]:
    """The rows `sql` (a query written around `Dialect.batch`) returns over `rows`, gathered in batch order."""
    if not rows:
        return []
    if session.dialect.supports_array_parameters:
        return await session.rows(sql, *(list(column) for column in zip(*rows, strict=True)))
    found: list[Row] = []
    for row in rows:
        found += await session.rows(sql, *row)
    return found


async def insert_rows(
    session: Session,
    table: str,
    columns: Columns,
    rows: Sequence[Sequence[Any]],
    *,
    order_by: str = '',
    on_conflict: str = '',
) -> None:
    """Insert `rows` into `table`, in their order (as one statement, in `order_by`'s: the lock order if it matters)."""
    await run_batch(session, _insert(session.dialect, table, tuple(columns), order_by, on_conflict), rows)


async def insert_returning(
    session: Session,
    table: str,
    columns: Columns,
    rows: Sequence[Sequence[Any]],
    returning: str,
    *,
    on_conflict: str = '',
) -> list[Row]:
    """`insert_rows`, returning `returning` of each row it inserted (in no given order): a caller that
    must know which rows a conflict refused reads that from the insert, not with a second statement."""
    return await select_batch(
        session, f'{_insert(session.dialect, table, tuple(columns), "", on_conflict)} RETURNING {returning}', rows
    )


@dataclass(frozen=True)
class Batch:
    """Rows to insert into a table, as `insert_rows` takes them, for `insert_then`."""

    table: str
    columns: Columns
    rows: Sequence[Sequence[Any]]
    order_by: str = ''
    on_conflict: str = ''


async def insert_then(session: Session, batches: Sequence[Batch], then: str, *params: Any) -> list[Row]:
    """Insert each of `batches`, in order, then run `then` (placeholders `$1`... for `params`) and return its
    rows. `then` must not depend on the inserted rows: it may see the tables with or without them.

    Where arrays bind, all of it is one statement (data-modifying CTEs): one round trip and one plan
    on the server instead of one per part. Elsewhere each part is a statement of its own.
    """
    if not session.dialect.supports_array_parameters:
        for batch in batches:
            await insert_rows(
                session, batch.table, batch.columns, batch.rows, order_by=batch.order_by, on_conflict=batch.on_conflict
            )
        return await session.rows(then, *params)
    parts: list[str] = []
    values: list[Any] = []
    for batch in batches:
        if batch.rows:
            sql = _insert(
                session.dialect, batch.table, tuple(batch.columns), batch.order_by, batch.on_conflict, len(values) + 1
            )
            parts.append(f'inserted_{len(parts)} AS ({sql})')
            values += session.dialect.rows_params(batch.rows, len(batch.columns))
    prefix = f'WITH {", ".join(parts)} ' if parts else ''
    return await session.rows(prefix + numbered_from(then, len(values) + 1), *values, *params)


@dataclass
class Tail:
    """Writes a transaction holds back to send at its end, in one statement where arrays bind (`insert_then`):
    rows to insert (`batches`), then an update of one row of `table` (the row `key` names), whose
    `RETURNING` carries `reads`, scalar subqueries that must not depend on the inserted rows.

    An append's last writes (its head's move, its segment, its membership and the counters) read
    nothing of each other, so on PostgreSQL they cost one round trip instead of one each.
    """

    table: str
    key: tuple[str, Any]
    batches: list[Batch] = field(default_factory=list[Batch])
    assign: dict[str, Any] = field(default_factory=dict[str, Any])
    """`column = value` of the updated row."""
    add: dict[str, int] = field(default_factory=dict[str, int])
    """`column = column + value` of the updated row."""
    reads: tuple[tuple[str, ...], tuple[Any, ...]] | None = None
    """Scalar subqueries (placeholders `$1`... for the params beside them), returned in their order by `send`."""

    def increment(self, column: str, value: int) -> None:
        self.add[column] = self.add.get(column, 0) + value

    async def send(self, session: Session) -> Row | None:
        """Write what the tail holds, then empty it; the row `reads` returns, or `None` without them."""
        batches, assign, add, reads = self.batches, self.assign, self.add, self.reads
        self.batches, self.assign, self.add, self.reads = [], {}, {}, None
        sets: list[str] = []
        params: list[Any] = [self.key[1]] if assign or add else []
        for column, value in assign.items():
            params.append(value)
            sets.append(f'{column} = ${len(params)}')
        for column, value in add.items():
            params.append(value)
            sets.append(f'{column} = {column} + ${len(params)}')
        returned = ''
        if reads is not None:
            expressions, values = reads
            returned = ', '.join(numbered_from(expression, len(params) + 1) for expression in expressions)
            params += values
        if sets:
            sql = f'UPDATE {self.table} SET {", ".join(sets)} WHERE {self.key[0]} = $1'  # noqa: S608 (fixed names)
            if returned:
                sql += f' RETURNING {returned}'
        elif returned:
            sql = f'SELECT {returned}'
        else:
            for batch in batches:
                await insert_rows(
                    session,
                    batch.table,
                    batch.columns,
                    batch.rows,
                    order_by=batch.order_by,
                    on_conflict=batch.on_conflict,
                )
            return None
        rows = await insert_then(session, batches, sql, *params)
        return rows[0] if returned else None


@functools.lru_cache(maxsize=256)
def numbered_from(sql: str, first: int) -> str:
    """`sql` with its placeholders `$1`, `$2`... renumbered from `$first` on."""
    return _PLACEHOLDER.sub(lambda match: f'${int(match[1]) + first - 1}', sql)


_PLACEHOLDER = re.compile(r'\$(\d+)')


@functools.lru_cache(maxsize=256)
def _insert(
    dialect: Dialect, table: str, columns: tuple[tuple[str, str], ...], order_by: str, on_conflict: str, first: int = 1
) -> str:
    """The `INSERT` of a batch of rows (`run_batch`, `select_batch`; with arrays, bound from `$first` on),
    built once per statement: an append sends several."""
    names = ', '.join(name for name, _ in columns)
    if dialect.supports_array_parameters:
        order = f'ORDER BY {order_by}' if order_by else ''
        rows = dialect.rows_table(columns, 'd', first)
        return f'INSERT INTO {table} ({names}) SELECT * FROM {rows} {order} {on_conflict}'  # noqa: S608
    values = ', '.join(f'${index}' for index in range(1, len(columns) + 1))
    return f'INSERT INTO {table} ({names}) VALUES ({values}) {on_conflict}'  # noqa: S608


async def delete_rows(
    session: Session, table: str, columns: Columns, rows: Sequence[Sequence[Any]], *, where: str = ''
) -> None:
    """Delete the rows of `table` whose `columns` equal one of `rows` (a key per row) and that meet `where`."""
    also = f' AND {where}' if where else ''
    if session.dialect.supports_array_parameters:
        match = ' AND '.join(f't.{name} = d.{name}' for name, _ in columns)
        sql = f'DELETE FROM {table} t USING {session.dialect.batch(columns)} WHERE {match}{also}'  # noqa: S608
    else:
        match = ' AND '.join(f'{name} = ${index}' for index, (name, _) in enumerate(columns, 1))
        sql = f'DELETE FROM {table} WHERE {match}{also}'  # noqa: S608 (fixed names; values are parameters)
    await run_batch(session, sql, rows)


async def allocate_keys(
    session: Session, table: Literal['entries', 'documents'], count: int, after: Statement | None = None
) -> list[int]:
    """`count` fresh keys of `table`'s generated key, ascending: rows inserted with them keep allocation order.
    `after` runs first (`Dialect.allocate_keys`)."""
    if count == 0:
        if after is not None:
            await session.rows(after[0], *after[1])
        return []
    column = 'entry_key' if table == 'entries' else 'doc_id'
    return await session.dialect.allocate_keys(session, table, column, count, after)


async def intern(
    session: Session, table: Literal['terms', 'runs'], values: Iterable[str], known: Mapping[str, int] | None = None
) -> dict[str, int]:
    """`value -> key` in `terms` or `runs`, inserting missing values in sorted order: two writers adding the same
    new values queue in one order and never deadlock; the loser of an insert reads the winner's keys.

    `known` holds keys this transaction already read (`log._entries.conversation_row`): they are not read
    again. Only a rebuild deletes from these tables, and it locks every table a write touches first.
    """
    column, key = ('term', 'term_id') if table == 'terms' else ('run_id', 'run_key')
    dialect = session.dialect
    select = f'SELECT {column}, {key} FROM {table} WHERE {column} {dialect.in_array(1, "text")}'  # noqa: S608
    ids: dict[str, int] = {}
    ordered = sorted(set(values))
    if known:
        ids.update((value, known[value]) for value in ordered if value in known)
        ordered = [value for value in ordered if value not in ids]
    for chunk in (ordered[start : start + CHUNK] for start in range(0, len(ordered), CHUNK)):
        ids.update((str(row[0]), int(row[1])) for row in await session.rows(select, dialect.array(chunk)))
        missing = [value for value in chunk if value not in ids]
        if not missing:
            continue
        rows = await session.rows(
            f'INSERT INTO {table} ({column}) SELECT value FROM {dialect.each(1, "text")} '  # noqa: S608 (fixed names)
            f'WHERE true ORDER BY value{dialect.byte_order} '
            f'ON CONFLICT ({column}) DO NOTHING RETURNING {column}, {key}',
            dialect.array(missing),
        )
        ids.update((str(row[0]), int(row[1])) for row in rows)
        late = [value for value in missing if value not in ids]
        if late:  # Inserted by a concurrent transaction that has committed since.
            ids.update((str(row[0]), int(row[1])) for row in await session.rows(select, dialect.array(late)))
    return ids
