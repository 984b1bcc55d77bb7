"""`PostgresConversationStore`: the engine store (`_engine.EngineStore`) on a PostgreSQL schema.

More in docs/design/store.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Self

from asyncpg import exceptions as pg

from .._engine import EngineStore, StoreSizes, refuse_unopened
from ..protocol import BodyStore, RecallStore
from ._connection import Database
from ._opener import open_database
from ._url import PostgresOptions, parse_postgres_url

__all__ = ('PostgresConversationStore', 'PostgresStoreStats')


@dataclass(frozen=True, kw_only=True)
class PostgresStoreStats(StoreSizes):
    """Sizes of a PostgreSQL store, for operators and the storage benchmark.

    `database_bytes` is the tables, indexes and TOAST of the store's schema (`pg_total_relation_size`).
    """

    url: str
    """The store's URL without password or options."""
    schema: str


class PostgresConversationStore(EngineStore):
    """A `ConversationStore` in a PostgreSQL schema, also a `DeltaWriter`, an `IndexReader` (with the
    array reads) and the `BodyStore` of `RecallDataCodec`, like `SqliteConversationStore`.

    Open it with [`open`][temporal_recall.store.PostgresConversationStore.open] (or `open_store` with a
    `postgresql://` URL) and close it when done (or use `async with`). One store holds a pool of
    connections and may be shared by any number of tasks; any number of stores, in any number of
    processes, may use the same schema at once.

    Durability is the server's: a commit returns once PostgreSQL has made it durable (with the
    default `synchronous_commit = on`), and a write is one transaction, so a killed worker leaves
    either all of an append or nothing.
    """

    # Each search read runs one query, without a snapshot transaction (BEGIN and COMMIT would double
    # its round trips).
    _search_snapshot = False

    def __init__(self, db: Database) -> None:
        """Use `await PostgresConversationStore.open(url)`; this wraps an already opened database.

        Opening is asynchronous (it connects, checks and migrates), so a constructor cannot do it:
        a url given here is refused at once with a `TypeError` naming the coroutine to await,
        rather than failing on first use.
        """
        if not isinstance(db, Database):  # pyright: ignore[reportUnnecessaryIsInstance]
            refuse_unopened('PostgresConversationStore', db, shown='url', noun='a URL', argument='url')
        super().__init__(db)
        self._db = db

    @staticmethod
    def _retry_delete(error: BaseException) -> bool:
        # A concurrent write started sharing an entry the delete removed; run again, it keeps that entry.
        return isinstance(error, pg.ForeignKeyViolationError)

    @classmethod
    async def open(cls, url: str | PostgresOptions) -> Self:
        """Open the store a `postgresql://` URL (see `open_store` for its options) names, migrating if needed.

        Raises:
            ConfigurationError: An unknown URL option or value, or the server refused the login.
            NotADatabase: The database does not exist, or the schema holds tables that are not a store.
            SchemaTooNew: A newer temporal-recall wrote the schema; nothing was changed.
            StoreReadOnly: `read_only=true` on a schema that needs migrating, or no right to create it.
            StoreUnavailable: The server cannot be reached.
        """
        options = parse_postgres_url(url) if isinstance(url, str) else url
        return cls(await open_database(options))

    @property
    def url(self) -> str:
        """The store's URL without password or options."""
        return self._db.display

    @property
    def schema(self) -> str:
        return self._db.options.schema

    async def stats(self) -> PostgresStoreStats:
        sizes = await self._sizes(
            'SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_catalog.pg_class c '
            "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'",
            self.schema,
        )
        return PostgresStoreStats(url=self.url, schema=self.schema, **sizes)


if TYPE_CHECKING:
    # Makes pyright check that the store satisfies the protocols the activities, the search and the codec use.
    _CONFORMS: type[RecallStore] = PostgresConversationStore
    _BODIES: type[BodyStore] = PostgresConversationStore
