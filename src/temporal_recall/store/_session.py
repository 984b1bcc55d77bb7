"""`Session` and `Dialect`: the one surface engine code runs its SQL through, on any backend.

The engine modules hold every rule of the store, and every statement that reads the same on both
backends, once. They run inside a transaction a driver opened (`Backend.run_read` / `run_write`)
and see it only as a `Session`:

- Statements use PostgreSQL's numbered placeholders (`$1`, `$2`) and standard SQL (`CAST(x AS
  BIGINT)`, not `x::bigint`). The SQLite session rewrites the placeholders to SQLite's `?1`, `?2`
  once per statement text (cached), so a statement costs nothing extra per call.
- What genuinely differs is asked of the session's `Dialect`: how an array parameter is bound and
  read as a table (`json_each` on SQLite, `unnest` on PostgreSQL), and the few functions and
  clauses spelled differently. A statement that needs a dialect is built once per dialect and kept.

Why not a generic query layer (SQLAlchemy and the like): SQLite's speed here comes from running a
whole transaction on the connection's own thread, one thread hop however many statements it takes
(see `_sqlite_db`), and PostgreSQL's from set-oriented statements (`unnest`, data-modifying CTEs)
in one round trip. A per-statement async layer would give up both.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

__all__ = ('POSTGRESQL', 'SQLITE', 'Backend', 'Dialect', 'Row', 'Session')

Row = Sequence[Any]
_T = TypeVar('_T')


@dataclass(frozen=True)
class Dialect:
    """What a backend spells its own way; everything else in the engine's SQL is written once."""

    name: Literal['sqlite', 'postgresql']

    def each(self, param: int, sql_type: str) -> str:
        """A table expression over array parameter `$param` (bound with `array`), its column named `value`.

        `sql_type` is the elements' PostgreSQL type (`bigint`, `text`, `bytea`); SQLite reads the
        JSON array `array` bound and needs no type.
        """
        if self.name == 'sqlite':
            return f'json_each(${param})'
        return f'unnest(${param}::{sql_type}[]) AS each_(value)'

    def array(self, values: Iterable[Any]) -> Any:
        """`values` as the parameter `each` reads: a JSON array for SQLite, a list for asyncpg."""
        if self.name == 'sqlite':
            return json.dumps(list(values))
        return list(values)

    @property
    def greatest(self) -> str:
        """The scalar maximum of several values (`max(a, b)` in SQLite, `GREATEST(a, b)` in PostgreSQL)."""
        return 'max' if self.name == 'sqlite' else 'GREATEST'

    @property
    def for_update(self) -> str:
        """The row-lock clause: PostgreSQL locks the rows it reads; SQLite's single writer needs none."""
        return '' if self.name == 'sqlite' else ' FOR UPDATE'

    def in_array(self, param: int, sql_type: str) -> str:
        """`IN` the array parameter `$param` (bound with `array`): the right-hand side of `x IN …` / `x = ANY(…)`.

        PostgreSQL's `= ANY($n)` lets an index scan take the whole array as its condition; SQLite
        reads the JSON array as a table.
        """
        if self.name == 'sqlite':
            return f'IN (SELECT value FROM json_each(${param}))'  # noqa: S608 (a parameter number, no value)
        return f'= ANY(${param}::{sql_type}[])'

    @property
    def join_in_order(self) -> str:
        """A join whose left side must drive: `CROSS JOIN` fixes SQLite's join order (its planner has no
        statistics to choose the few wanted rows first); PostgreSQL's planner chooses well and spells it `JOIN`."""
        return 'CROSS JOIN' if self.name == 'sqlite' else 'JOIN'

    @property
    def locks_rows(self) -> bool:
        """Whether writers run side by side and keep apart by row locks (PostgreSQL), not one at a time (SQLite)."""
        return self.name == 'postgresql'

    @property
    def byte_order(self) -> str:
        """The `COLLATE` clause ordering text by its bytes (SQLite's default `BINARY` already does)."""
        return '' if self.name == 'sqlite' else ' COLLATE "C"'

    def array_of(self, select: str) -> str:
        """A scalar subquery gathering `select`'s one column, in its order, into an array (see `read_array`)."""
        if self.name == 'sqlite':
            return f'(SELECT json_group_array(value) FROM ({select}))'  # noqa: S608
        return f'ARRAY({select})'

    def read_array(self, value: Any) -> list[Any]:
        """The list an `array_of` column holds: SQLite returns it as JSON text, asyncpg as a list."""
        return json.loads(value) if self.name == 'sqlite' else list(value)


SQLITE = Dialect('sqlite')
POSTGRESQL = Dialect('postgresql')


class Session(Protocol):
    """One open transaction (or one plain read) on a backend. Parameters are positional (`$1` is the first).

    The methods return awaitables rather than being coroutines: on SQLite they run synchronously on
    the connection thread and their awaits never suspend (see `_sqlite_db`).
    """

    @property
    def dialect(self) -> Dialect: ...

    def rows(self, sql: str, *params: Any) -> Awaitable[list[Row]]: ...

    def one(self, sql: str, *params: Any) -> Awaitable[Row | None]:
        """The first row, or `None`."""
        ...

    def value(self, sql: str, *params: Any) -> Awaitable[Any]:
        """The first column of the first row, or `None` if there is no row."""
        ...

    def run(self, sql: str, *params: Any) -> Awaitable[None]: ...

    def many(self, sql: str, rows: Iterable[Sequence[Any]]) -> Awaitable[None]:
        """Run `sql` once per parameter row."""
        ...


class Backend(Protocol):
    """A driver's transactions: each runs `body` (a coroutine function) with a `Session` and returns its result."""

    @property
    def dialect(self) -> Dialect: ...

    async def run_read(self, body: Callable[[Session], Coroutine[Any, Any, _T]], *, snapshot: bool = True) -> _T:
        """Run `body`; with `snapshot`, every statement sees one consistent state of the database."""
        ...

    async def run_write(
        self,
        body: Callable[[Session], Coroutine[Any, Any, _T]],
        *,
        retry: Callable[[BaseException], bool] | None = None,
    ) -> _T:
        """Run `body` in a write transaction, committed when it returns and rolled back if it raises.

        A backend that runs writers side by side may run `body` again after a conflict it resolved by
        aborting (and after an error `retry` accepts), so `body` must have no effect outside the database.
        """
        ...

    async def close(self) -> None: ...
