"""An asyncpg pool with the store's transactions, retries and error translation. More in docs/design/store.md."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterable, Sequence
from concurrent.futures import Future
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar, cast

import asyncpg
from asyncpg import exceptions as pg

from temporal_recall.errors import ConfigurationError, NotADatabase, RecallError, StoreReadOnly, StoreUnavailable

from ..sql._session import Dialect, Session
from ._dialect import POSTGRESQL
from ._url import PostgresOptions

__all__ = ('Conn', 'Database', 'PostgresSession', 'create_pool', 'quote_ident', 'translate_error')

Conn: TypeAlias = asyncpg.Connection
T = TypeVar('T')

MAX_ATTEMPTS = 12
"""Tries of one write before a persistent conflict is reported as `StoreUnavailable`."""

_CLOSE_TIMEOUT_S = 10.0


def quote_ident(name: str) -> str:
    """`name` as a quoted identifier (names are validated by `PostgresOptions`; quotes doubled anyway)."""
    return '"' + name.replace('"', '""') + '"'


_Rule = tuple[type[BaseException] | tuple[type[BaseException], ...], type[RecallError], str]

_RULES: tuple[_Rule, ...] = (
    (
        pg.InvalidCatalogNameError,
        NotADatabase,
        '{where} cannot be opened: {error}. Create the database (createdb) or fix its name in the store URL.',
    ),
    (
        pg.InvalidAuthorizationSpecificationError,
        ConfigurationError,
        '{where} refused the login: {error}. Fix the user and password in the store URL (or its passfile).',
    ),
    (
        pg.ReadOnlySQLTransactionError,
        StoreReadOnly,
        '{where} refuses writes ({error}): the server is a read-only standby or the session is read-only. '
        'Point the store URL at the primary.',
    ),
    (
        pg.InsufficientPrivilegeError,
        StoreReadOnly,
        '{where} refuses the operation: {error}. Grant the store user rights on its schema '
        '(USAGE, CREATE and table privileges), or use a user that owns it.',
    ),
    (
        pg.TransactionRollbackError,
        StoreUnavailable,
        '{where} kept aborting a write because of concurrent writers ({error}). Retry it.',
    ),
    (
        pg.QueryCanceledError,
        StoreUnavailable,
        '{where} cancelled a statement ({error}), usually the statement timeout. Retry, or raise '
        'statement_timeout_ms in the store URL.',
    ),
    (pg.LockNotAvailableError, StoreUnavailable, '{where} could not take a lock in time ({error}). Retry later.'),
    (
        (pg.InsufficientResourcesError, pg.OperatorInterventionError, pg.PostgresConnectionError),
        StoreUnavailable,
        '{where} is unavailable: {error}. Retry later; check the server if it persists.',
    ),
    (
        (OSError, TimeoutError),
        StoreUnavailable,
        'Cannot reach {where}: {error}. Check that the server is running and '
        'that the host and port in the store URL are right.',
    ),
)
"""`(driver errors, store error, message)`, the first match wins: what each error means and how to fix it."""


def _lost_connection(error: BaseException) -> bool:
    """What asyncpg raises when the server dropped a pooled connection the client has not noticed yet."""
    return isinstance(error, pg.InternalClientError) or (
        isinstance(error, pg.InterfaceError) and ('closed' in str(error) or 'connection' in str(error))
    )


def translate_error(error: BaseException, display: str) -> RecallError | None:
    """The store error a driver or network error means, or `None` for errors that indicate a bug."""
    where = f'the PostgreSQL store at {display}'
    if _lost_connection(error) and not isinstance(error, OSError | TimeoutError):
        return StoreUnavailable(f'{where} lost its connection: {error}. Retry; check the server if it persists.')
    for matches, kind, message in _RULES:
        if isinstance(error, matches):
            return kind(message.format(where=where, error=str(error) or type(error).__name__))
    return None


def _reraise(error: BaseException, display: str) -> BaseException:
    translated = translate_error(error, display)
    if translated is None:
        return error
    translated.__cause__ = error
    return translated


async def _keep_session(connection: object) -> None:
    """Replaces asyncpg's reset query on release (`RESET ALL; UNLISTEN *; …`, a round trip per operation).

    The store keeps no session state: settings are startup parameters, `SET LOCAL` and advisory locks
    are transaction-scoped. asyncpg still rolls back a transaction left open (a cancelled task)
    before calling this.
    """


async def create_pool(options: PostgresOptions, *, server_settings: dict[str, str]) -> asyncpg.Pool:
    """A connection pool whose connections all search only the store's schema.

    Raises:
        StoreUnavailable, NotADatabase, ConfigurationError: The server cannot be reached, has no such
            database, or refuses the login.
    """
    # No JIT: the store's statements are short index walks, and a recursive query (search context,
    # graph walks) whose row count the planner overestimates would otherwise spend tens of
    # milliseconds compiling code that then runs for less than one.
    # Custom plans only (PostgreSQL 12 or later): asyncpg prepares every statement, and after five
    # runs PostgreSQL may switch a prepared statement to a generic plan that knows neither an array
    # parameter's length nor its values. For `term = ANY($1)` that plan compared every row of `terms`
    # with every element in turn, where a custom plan hashes the array: a 2-message append took 37 ms
    # instead of 19 ms, and grew with the vocabulary. Planning each statement costs tens of µs.
    settings = {
        'search_path': quote_ident(options.schema),
        'jit': 'off',
        'plan_cache_mode': 'force_custom_plan',
        **server_settings,
    }
    if options.statement_timeout_ms:
        settings['statement_timeout'] = str(options.statement_timeout_ms)
    if options.read_only:
        settings['default_transaction_read_only'] = 'on'
    try:
        pool = await asyncpg.create_pool(
            options.dsn,
            min_size=options.pool_min,
            max_size=options.pool_max,
            timeout=options.connect_timeout_ms / 1000,
            server_settings=settings,
            reset=_keep_session,
        )
    except Exception as error:
        raise _reraise(error, options.display) from error
    return pool


class PostgresSession:
    """The engine's `Session` on one asyncpg connection (asyncpg prepares and caches each statement)."""

    __slots__ = ('conn',)

    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    @property
    def dialect(self) -> Dialect:
        return POSTGRESQL

    async def rows(self, sql: str, *params: Any) -> list[Any]:
        return await self.conn.fetch(sql, *params)

    async def one(self, sql: str, *params: Any) -> Any:
        return await self.conn.fetchrow(sql, *params)

    async def value(self, sql: str, *params: Any) -> Any:
        return await self.conn.fetchval(sql, *params)

    async def run(self, sql: str, *params: Any) -> None:
        await self.conn.execute(sql, *params)

    async def many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        await self.conn.executemany(sql, rows)

    async def finished(self, work: Future[T]) -> T:
        return await asyncio.wrap_future(work)


class Database:
    """An open PostgreSQL store database, the driver's `Backend`: `run_read` and `run_write` run `body(session)`."""

    def __init__(self, pool: asyncpg.Pool, options: PostgresOptions) -> None:
        self._pool: asyncpg.Pool | None = pool
        self.options = options

    @property
    def display(self) -> str:
        return self.options.display

    @property
    def closed(self) -> bool:
        return self._pool is None

    async def close(self) -> None:
        """Close every pooled connection (waiting for borrowed ones, then terminating stragglers)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        try:
            await asyncio.wait_for(pool.close(), timeout=_CLOSE_TIMEOUT_S)
        except TimeoutError:
            pool.terminate()

    @asynccontextmanager
    async def connection(self) -> AsyncGenerator[Conn]:
        """A pooled connection for the body of the `with` (errors are left to the caller to translate)."""
        pool = self._pool
        if pool is None:
            raise StoreUnavailable(
                f'The PostgreSQL store at {self.display} is closed; open it again with open_store().'
            )
        try:
            connection = await pool.acquire(timeout=self.options.acquire_timeout_ms / 1000)
        except TimeoutError as error:
            raise StoreUnavailable(
                f'The PostgreSQL store at {self.display} had no free connection for '
                f'{self.options.acquire_timeout_ms} ms: all {self.options.pool_max} pooled connections were busy. '
                'Retry, or raise pool_max or acquire_timeout_ms in the store URL.'
            ) from error
        try:
            yield cast(Conn, connection)
        finally:
            await pool.release(connection)

    @property
    def dialect(self) -> Dialect:
        return POSTGRESQL

    async def run_read(self, body: Callable[[Session], Coroutine[Any, Any, T]], *, snapshot: bool = True) -> T:
        """`Backend.run_read`: with `snapshot`, inside a read-only REPEATABLE READ transaction (one consistent view)."""
        try:
            async with self.connection() as conn:
                if not snapshot:
                    return await body(PostgresSession(conn))
                async with conn.transaction(isolation='repeatable_read', readonly=True):
                    return await body(PostgresSession(conn))
        except (pg.PostgresError, pg.InterfaceError, pg.InternalClientError, OSError, TimeoutError) as error:
            raise _reraise(error, self.display) from error

    async def run_write(
        self,
        body: Callable[[Session], Coroutine[Any, Any, T]],
        *,
        retry: Callable[[BaseException], bool] | None = None,
        autocommit: bool = False,
    ) -> T:
        """`Backend.run_write`: `body` in a READ COMMITTED transaction, committed on return, rolled back on a raise.

        With `autocommit`, each statement `body` sends is its own transaction (no `BEGIN`, no `COMMIT`: two
        round trips fewer); a deadlock or a serialization failure runs `body` again all the same.

        A deadlock or serialization failure, or an error `retry` accepts, rolls back and runs `body`
        again after a short random pause, up to `MAX_ATTEMPTS` times.

        Raises:
            StoreReadOnly: The store was opened with `read_only=true` (nothing is sent to the server).
        """
        if self.options.read_only:
            raise StoreReadOnly(
                f'The PostgreSQL store at {self.display} was opened with read_only=true; '
                'open it without that option to write.'
            )
        attempt = 0
        while True:
            attempt += 1
            try:
                async with self.connection() as conn:
                    if autocommit:
                        return await body(PostgresSession(conn))
                    async with conn.transaction():
                        return await body(PostgresSession(conn))
            except (pg.PostgresError, pg.InterfaceError, pg.InternalClientError, OSError, TimeoutError) as error:
                again = isinstance(error, pg.DeadlockDetectedError | pg.SerializationError) or (
                    retry is not None and retry(error)
                )
                if not again or attempt >= MAX_ATTEMPTS:
                    raise _reraise(error, self.display) from error
            await asyncio.sleep(random.uniform(0, min(0.25, 0.002 * 2**attempt)))


if TYPE_CHECKING:
    from ..sql._session import Backend

    _BACKEND: type[Backend] = Database  # pyright checks that the database is the engine's `Backend`
