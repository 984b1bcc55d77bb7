"""`PostgresConversationStore`: pydantic-ai's `ConversationStore` on PostgreSQL, with the same BM25 index.

Same semantics and the same answers as `SqliteConversationStore` (the conformance, append, index and
parity tests run against both): the log, the records and the index change in the same transactions,
so a conflict, a crash or a killed worker never leaves an index row without its entry or an entry
without its index rows. What PostgreSQL adds is many writers at once — several worker processes,
each with a pool of connections — kept correct by row locks and retries (see `_postgres_db` and
`_postgres_index`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, NoReturn, Self

from asyncpg import exceptions as pg
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
)
from pydantic_ai.exceptions import UserError

from ._bodies import StoredBodies, postgres_bodies
from ._checks import CheckedStore, check_append, check_id, check_optional_id, check_record, check_target
from ._integrity import CheckReport, run_check
from ._postgres_db import Conn, Database
from ._postgres_impact import document_frequencies as _document_frequencies
from ._postgres_impact import postings_for as _postings_for
from ._postgres_impact import top_postings as _top_postings
from ._postgres_index import lock_tenants, rebuild_index
from ._postgres_log import delete_conversation, history, lock_conversation, read_entry_row, read_record, read_records
from ._postgres_migrate import open_database
from ._postgres_reader import documents as _documents
from ._postgres_reader import index_stats as _index_stats
from ._postgres_reader import postings as _postings
from ._postgres_url import PostgresOptions, parse_postgres_url
from ._postgres_write import append as _append
from ._postgres_write import write_record as _write_record
from ._protocol import (
    AppendRequest,
    AppendResult,
    BodyStore,
    DocumentRow,
    ImpactReader,
    IndexStats,
    Posting,
    RecallStore,
    SearchTarget,
)
from ._serialization import MissingEntry, prepare_message, record_columns, scope_key

__all__ = ('PostgresConversationStore', 'PostgresStoreStats')


@dataclass(frozen=True, kw_only=True)
class PostgresStoreStats:
    """Sizes of a PostgreSQL store, for operators and the storage benchmark (fields as `StoreStats`)."""

    url: str
    """The store's URL without password or options."""
    schema: str
    conversations: int
    entries: int
    documents: int
    postings: int
    database_bytes: int
    """Tables, indexes and TOAST of the store's schema (`pg_total_relation_size`)."""


def _refuse_unopened(value: object) -> NoReturn:
    # The URL is not quoted back: it may hold a password.
    if isinstance(value, str | os.PathLike):
        raise TypeError(
            'PostgresConversationStore(url) got a URL, but a store is opened (connected, checked, migrated) '
            'with an await: use `await open_store(url)` or `await PostgresConversationStore.open(url)`.'
        )
    raise TypeError(
        f'PostgresConversationStore() takes an opened database, not {type(value).__name__}; '
        'use `await open_store(url)` or `await PostgresConversationStore.open(url)`.'
    )


class PostgresConversationStore(CheckedStore, StoredBodies):
    """A `ConversationStore` in a PostgreSQL schema, also a `DeltaWriter`, an `IndexReader` (with the
    `ImpactReader` reads) and the `BodyStore` of `RecallDataCodec`, like `SqliteConversationStore`.

    Open it with [`open`][temporal_recall.store.PostgresConversationStore.open] (or `open_store` with a
    `postgresql://` URL) and close it when done (or use `async with`). One store holds a pool of
    connections and may be shared by any number of tasks; any number of stores, in any number of
    processes, may use the same schema at once.

    Durability is the server's: a commit returns once PostgreSQL has made it durable (with the
    default `synchronous_commit = on`), and a write is one transaction, so a killed worker leaves
    either all of an append or nothing.
    """

    def __init__(self, db: Database) -> None:
        """Use `await PostgresConversationStore.open(url)`; this wraps an already opened database.

        Opening is asynchronous (it connects, checks and migrates), so a constructor cannot do it:
        a url given here is refused at once with a `TypeError` naming the coroutine to await,
        rather than failing on first use.
        """
        if not isinstance(db, Database):  # pyright: ignore[reportUnnecessaryIsInstance]
            _refuse_unopened(db)
        self._db = db
        self._bodies = postgres_bodies(db)

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

    async def close(self) -> None:
        """Close the pool. Safe to call twice; any later use raises `StoreUnavailable`."""
        await self._db.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.close()

    # --- ConversationStore primitives -------------------------------------------------------------

    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        check_id(conversation_id, 'conversation id')
        return await self._db.read(lambda conn: read_record(conn, conversation_id), snapshot=False)

    async def read_records(self, *, scope: str | None = None, limit: int | None = None) -> Sequence[ConversationRecord]:
        if limit is not None and limit < 0:
            raise UserError('`limit` must not be negative.')
        check_optional_id(scope, 'scope')
        key = None if scope is None else scope_key(scope)
        return await self._db.read(lambda conn: read_records(conn, scope_key=key, limit=limit), snapshot=False)

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        """The entry with this id.

        Raises:
            UnknownEntry: No such entry (the exception is also a `LookupError`, as pydantic-ai expects).
            InvalidIdentifier: `entry_id` is too long or not printable text.
        """
        check_id(entry_id, 'entry id')
        entry = await self._db.read(lambda conn: read_entry_row(conn, entry_id), snapshot=False)
        if entry is None:
            raise MissingEntry(entry_id)
        return entry

    async def read_history(self, head_id: str | None, *, limit: int | None = None) -> list[ConversationEntry]:
        """The history ending at `head_id`, oldest first, or only its last `limit` entries, in one query.

        Raises:
            UnknownEntry: `head_id` is not stored (also a `LookupError`).
            UserError: `limit` is negative.
        """
        if limit is not None and limit < 0:
            raise UserError('`limit` must not be negative.')
        check_optional_id(head_id, 'entry id')
        if head_id is None or limit == 0:
            return []
        entries = await self._db.read(lambda conn: history(conn, head_id, limit), snapshot=False)
        if entries is None:
            raise MissingEntry(head_id)
        return entries

    async def write_record(
        self,
        record: ConversationRecord,
        *,
        new_entries: Sequence[ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:
        """Store `record`, its `new_entries` and their index rows in one transaction.

        The conversation's row is locked before its revision is checked, so of two writers that loaded
        the same revision exactly one succeeds. Otherwise as `SqliteConversationStore.write_record`.

        Raises:
            ConversationConflict: The stored revision is not `expected_revision` (or the conversation was
                created concurrently), or the head, a branch or a new entry's parent names an entry that
                is not stored (a concurrent delete released it).
            MessageNotSerializable: A message cannot be stored as JSON (checked before anything is written).
        """
        check_record(record, new_entries)
        prepared = [prepare_message(entry.message) for entry in new_entries]
        columns = record_columns(record)
        conflict = ConversationConflict(record.conversation_id)

        async def body(conn: Conn) -> None:
            try:
                await _write_record(conn, record, new_entries, prepared, columns, expected_revision)
            except (pg.UniqueViolationError, pg.ForeignKeyViolationError) as error:
                # Created by a concurrent writer, or an entry it names was released by a concurrent delete.
                raise conflict from error

        await self._db.write(body)

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        """Delete a conversation and everything only it holds, in one transaction.

        Removes and keeps exactly what `SqliteConversationStore.delete_record` does. If a concurrent
        write starts sharing an entry the delete was about to remove, the delete is retried and keeps it.

        Raises:
            ConversationConflict: No record with `expected_revision` is stored.
        """
        check_id(conversation_id, 'conversation id')

        async def body(conn: Conn) -> None:
            row = await lock_conversation(conn, conversation_id)
            if row is None or row.revision != expected_revision:
                raise ConversationConflict(conversation_id)
            await lock_tenants(conn, [row.tenant_id])
            await delete_conversation(conn, row.conv_key)

        await self._db.write(body, retry=lambda error: isinstance(error, pg.ForeignKeyViolationError))

    # --- DeltaWriter ------------------------------------------------------------------------------

    async def append(self, request: AppendRequest) -> AppendResult:
        """Apply one step boundary's delta in a single transaction, index included (see `_append`).

        Raises:
            UnknownConversation: The conversation is missing (and `create=False`) or has another scope.
            HistoryMismatch: The delta does not follow the stored history; resend with `base_length=0`.
            MessageNotSerializable: A message cannot be stored as JSON (nothing is written).
            InvalidIdentifier: The conversation id, scope or run id is too long or not printable text.
        """
        check_append(request)
        return await _append(self._db, request)

    # --- IndexReader ------------------------------------------------------------------------------

    # Each call resolves its target, then runs one query, without a snapshot transaction (BEGIN and
    # COMMIT would double its round trips). A write landing in between only makes the answer that of
    # a moment later, as between two calls; the target is enforced again inside every query.

    async def index_stats(self, target: SearchTarget) -> IndexStats | None:
        check_target(target)  # Every search starts here.
        return await self._db.read(lambda conn: _index_stats(conn, target), snapshot=False)

    async def postings(self, target: SearchTarget, terms: Sequence[str]) -> dict[str, list[Posting]]:
        return await self._db.read(lambda conn: _postings(conn, target, terms), snapshot=False)

    async def documents(
        self,
        target: SearchTarget,
        doc_ids: Sequence[int],
        *,
        context: int = 0,
        limit: int | None = None,
        exclude_run_id: str | None = None,
    ) -> list[DocumentRow]:
        if context < 0:
            raise ValueError('context must not be negative.')
        return await self._db.read(
            lambda conn: _documents(conn, target, doc_ids, context=context, limit=limit, exclude_run_id=exclude_run_id),
            snapshot=False,
        )

    # --- ImpactReader (scope-wide searches read only the head of a common term's postings) -----------

    async def document_frequencies(self, target: SearchTarget, terms: Sequence[str]) -> dict[str, int] | None:
        return await self._db.read(lambda conn: _document_frequencies(conn, target, terms), snapshot=False)

    async def top_postings(
        self, target: SearchTarget, term: str, per_group: int
    ) -> tuple[list[Posting], list[tuple[int, int]]] | None:
        return await self._db.read(lambda conn: _top_postings(conn, target, term, per_group), snapshot=False)

    async def postings_for(self, target: SearchTarget, term: str, doc_ids: Sequence[int]) -> list[Posting]:
        return await self._db.read(lambda conn: _postings_for(conn, target, term, doc_ids), snapshot=False)

    # --- Maintenance ------------------------------------------------------------------------------

    async def reindex(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Drop and rebuild the index from the log in one transaction; returns the number of documents.

        Same order rule as `SqliteConversationStore.reindex`. Writers wait for the rebuild; readers do not.
        """
        return await self._db.write(lambda conn: rebuild_index(conn, progress))

    async def check(self, progress: Callable[[str], None] | None = None) -> CheckReport:
        """Verify the store's integrity in one REPEATABLE READ snapshot (see `_integrity`); writers are not blocked."""

        async def body(conn: Conn) -> CheckReport:
            async def fetch(sql: str, params: Sequence[object]) -> list[Any]:
                numbered = iter(range(1, len(params) + 1))
                return await conn.fetch(re.sub(r'\?', lambda _: f'${next(numbered)}', sql), *params)

            return await run_check(fetch, progress)

        return await self._db.read(body)

    async def stats(self) -> PostgresStoreStats:
        async def body(conn: Conn) -> PostgresStoreStats:
            row = await conn.fetchrow(
                'SELECT (SELECT count(*) FROM conversations), (SELECT count(*) FROM entries), '
                '(SELECT count(*) FROM documents), (SELECT count(*) FROM postings), '
                '(SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_catalog.pg_class c '
                "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r')",
                self.schema,
            )
            assert row is not None
            return PostgresStoreStats(
                url=self.url,
                schema=self.schema,
                conversations=int(row[0]),
                entries=int(row[1]),
                documents=int(row[2]),
                postings=int(row[3]),
                database_bytes=int(row[4]),
            )

        return await self._db.read(body)


if TYPE_CHECKING:
    # Makes pyright check that the store satisfies the protocols the activities, the search and the codec use.
    _CONFORMS: type[RecallStore] = PostgresConversationStore
    _IMPACT: type[ImpactReader] = PostgresConversationStore
    _BODIES: type[BodyStore] = PostgresConversationStore
