"""`SqliteConversationStore`: pydantic-ai's `ConversationStore` on one SQLite file, with a BM25 index.

The log, the records and the search index live in the same database and change in the same
transactions, so a conflict, a crash or a kill never leaves an index row without its entry or an
entry without its index rows. See `_sqlite_schema` for the tables and `_sqlite_index` for how the
index follows the log.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, NoReturn, Self

from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
)
from pydantic_ai.exceptions import UserError

from . import _impact, _reader
from ._checks import CheckedStore, check_append, check_id, check_optional_id, check_record, check_target
from ._integrity import CheckReport, run_check
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
from ._sqlite_db import Database, Row, Synchronous
from ._sqlite_index import (
    rebuild_index,
)
from ._sqlite_log import (
    conversation_row,
    delete_conversation,
    history,
    read_entry_row,
    read_record,
    read_records,
)
from ._sqlite_migrate import connect
from ._sqlite_write import append as _append
from ._sqlite_write import write_record as _write_record

__all__ = ('SqliteConversationStore', 'StoreStats')


@dataclass(frozen=True, kw_only=True)
class StoreStats:
    """Sizes of a store, for operators and the storage benchmark."""

    path: Path
    conversations: int
    entries: int
    """Stored messages: each message is stored once, however many conversations or branches share it."""
    documents: int
    postings: int
    database_bytes: int
    """Pages in use times the page size: the database file's size once the WAL is checkpointed."""


def _refuse_unopened(value: object) -> NoReturn:
    if isinstance(value, str | os.PathLike):
        shown = repr(os.fspath(value))  # pyright: ignore[reportUnknownArgumentType]
        raise TypeError(
            f'SqliteConversationStore({shown}) got a path, but a store is opened (connected, checked, migrated) '
            f'with an await: use `await open_store({shown})` or `await SqliteConversationStore.open({shown})`.'
        )
    raise TypeError(
        f'SqliteConversationStore() takes an opened database, not {type(value).__name__}; '
        'use `await open_store(url)` or `await SqliteConversationStore.open(path)`.'
    )


class SqliteConversationStore(CheckedStore):
    """A `ConversationStore` in a SQLite database (WAL mode), which is also a `DeltaWriter` and an `IndexReader`.

    Open it with [`open`][temporal_recall.store.SqliteConversationStore.open] and close it when done
    (or use `async with`). One store holds one connection; several stores, threads or processes may
    use the same file, SQLite serialising their writes (each waits up to `busy_timeout_ms` for the
    write lock, then raises `StoreUnavailable`).

    Durability: `synchronous='NORMAL'` (the default) is crash-safe in WAL mode — a crash or kill never
    corrupts the database or leaves part of a transaction — but a power loss or OS crash may roll back
    the last transactions. Pass `synchronous='FULL'` to make every commit survive power loss too.
    """

    def __init__(self, db: Database) -> None:
        """Use `await SqliteConversationStore.open(path)`; this wraps an already opened database.

        Opening is asynchronous (it connects, checks and migrates), so a constructor cannot do it:
        a path given here is refused at once with a `TypeError` naming the coroutine to await,
        rather than failing on first use.
        """
        if not isinstance(db, Database):  # pyright: ignore[reportUnnecessaryIsInstance]
            _refuse_unopened(db)
        self._db = db

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = 5000,
        synchronous: Synchronous = 'NORMAL',
        read_only: bool = False,
    ) -> Self:
        """Open the store at `path`, creating it or applying missing migrations if needed.

        Raises:
            NotADatabase: The file exists but is not a SQLite database, or is one without our schema.
            SchemaTooNew: A newer temporal-recall wrote it; nothing was changed.
            StoreReadOnly: `read_only=True` on a database that needs migrating.
            StoreUnavailable: SQLite cannot open the file, or it stayed locked past `busy_timeout_ms`.
        """
        db = await connect(Path(path), busy_timeout_ms=busy_timeout_ms, synchronous=synchronous, read_only=read_only)
        return cls(db)

    @property
    def path(self) -> Path:
        return self._db.path

    async def close(self) -> None:
        """Close the connection. Safe to call twice; any later use raises `StoreUnavailable`."""
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
        async with self._db.read():
            return await read_record(self._db, conversation_id)

    async def read_records(self, *, scope: str | None = None, limit: int | None = None) -> Sequence[ConversationRecord]:
        if limit is not None and limit < 0:
            raise UserError('`limit` must not be negative.')
        check_optional_id(scope, 'scope')
        async with self._db.read():
            return await read_records(self._db, scope_key=None if scope is None else scope_key(scope), limit=limit)

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        """The entry with this id.

        Raises:
            UnknownEntry: No such entry (the exception is also a `LookupError`, as pydantic-ai expects).
            InvalidIdentifier: `entry_id` is too long or not printable text.
        """
        check_id(entry_id, 'entry id')
        async with self._db.read(snapshot=False):
            entry = await read_entry_row(self._db, entry_id)
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
        async with self._db.read(snapshot=False):
            entries = await history(self._db, head_id, limit)
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

        The revision check happens inside the transaction, so a conflict leaves nothing behind. A
        record created over entries that are already stored (a fork) gets those entries indexed into
        its membership; documents are per scope, so a fork into another scope gets its own. Entry ids
        are immutable: an entry whose id is already stored is not written again.

        Raises:
            ConversationConflict: The stored revision is not `expected_revision`, or the head, a branch
                or a new entry's parent names an entry that is not stored (a concurrent delete released it).
            MessageNotSerializable: A message cannot be stored as JSON (checked before anything is written).
        """
        db = self._db
        check_record(record, new_entries)
        prepared = [prepare_message(entry.message) for entry in new_entries]
        columns = record_columns(record)
        await _write_record(db, record, new_entries, prepared, columns, expected_revision)

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        """Delete a conversation and everything only it holds, in one transaction.

        Removed: the record; the entries no remaining record reaches (through its head or any of its
        branches), so a fork, or a conversation this one was forked from, keeps every entry it shares;
        the conversation's index membership; the documents no other conversation of the same scope
        still holds, with their postings; and the idempotency keys of its appends.

        Kept: entries other conversations reach, their documents, and the interned vocabulary
        (`terms`) and run ids, which `reindex` prunes. SQLite is built with `SECURE_DELETE` in the
        standard Python builds, overwriting freed pages; check `PRAGMA secure_delete` if erasure of
        the bytes on disk matters.

        Raises:
            ConversationConflict: No record with `expected_revision` is stored.
        """
        check_id(conversation_id, 'conversation id')
        async with self._db.write():
            row = await conversation_row(self._db, conversation_id)
            if row is None or row.revision != expected_revision:
                raise ConversationConflict(conversation_id)
            await delete_conversation(self._db, row.conv_key)

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

    # The search reads run whole on the connection thread (see `run_read`): a
    # search is latency-bound by round trips, not by SQLite.

    async def index_stats(self, target: SearchTarget) -> IndexStats | None:
        check_target(target)  # Every search starts here.
        return await self._db.run_read(lambda s: _reader.index_stats(s, target))

    async def postings(self, target: SearchTarget, terms: Sequence[str]) -> dict[str, list[Posting]]:
        return await self._db.run_read(lambda s: _reader.postings(s, target, terms))

    # --- Message bodies (RecallDataCodec) -----------------------------------------------------------

    async def put_bodies(self, scope: str | None, bodies: dict[str, bytes]) -> None:
        """Store message bodies by hash; a body already stored is left as it is."""
        check_optional_id(scope, 'scope')
        rows = [(scope_key(scope), digest, body) for digest, body in bodies.items()]

        async def write(db: Database) -> None:
            await db.many(
                'INSERT INTO message_bodies (scope_key, content_hash, body) VALUES (?, ?, ?) '
                'ON CONFLICT (scope_key, content_hash) DO NOTHING',
                rows,
            )

        await self._db.write_on_connection_thread(write)

    async def get_bodies(self, scope: str | None, hashes: Sequence[str]) -> dict[str, bytes]:
        """The stored bodies among `hashes`, within `scope` only."""
        check_optional_id(scope, 'scope')
        key = scope_key(scope)

        async def read(db: Database) -> dict[str, bytes]:
            rows = await db.rows(
                'SELECT content_hash, body FROM message_bodies WHERE scope_key = ? '
                'AND content_hash IN (SELECT value FROM json_each(?))',
                (key, json.dumps(list(hashes))),
            )
            return {row[0]: bytes(row[1]) for row in rows}

        return await self._db.read_on_connection_thread(read)

    async def document_frequencies(self, target: SearchTarget, terms: Sequence[str]) -> dict[str, int] | None:
        return await self._db.run_read(lambda s: _impact.document_frequencies(s, target, terms))

    async def top_postings(
        self, target: SearchTarget, term: str, per_group: int
    ) -> tuple[list[Posting], list[tuple[int, int]]] | None:
        return await self._db.run_read(lambda s: _impact.top_postings(s, target, term, per_group))

    async def postings_for(self, target: SearchTarget, term: str, doc_ids: Sequence[int]) -> list[Posting]:
        return await self._db.run_read(lambda s: _impact.postings_for(s, target, term, doc_ids))

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
        return await self._db.run_read(
            lambda s: _reader.documents(s, target, doc_ids, context=context, limit=limit, exclude_run_id=exclude_run_id)
        )

    # --- Maintenance ------------------------------------------------------------------------------

    async def reindex(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Drop and rebuild the index from the log in one transaction; returns the number of documents.

        The rebuild replays membership in the order the writes happened, so document ids keep the
        incremental order (the ranking tie-break). One exception: a document whose first appearance
        was in a since-deleted conversation is ordered by its first surviving appearance.
        `progress(done, total)` is called as (conversation, entry) memberships are replayed.
        """
        async with self._db.write():
            return await rebuild_index(self._db, progress)

    async def check(self, progress: Callable[[str], None] | None = None) -> CheckReport:
        """Verify the store's integrity in one read snapshot (see `_integrity`); writers are not blocked."""

        async def fetch(sql: str, params: Sequence[object]) -> list[Row]:
            return await self._db.rows(sql, tuple(params))

        async with self._db.read():
            return await run_check(fetch, progress)

    async def stats(self) -> StoreStats:
        async with self._db.read():
            row = await self._db.one(
                'SELECT (SELECT count(*) FROM conversations), (SELECT count(*) FROM entries), '
                '(SELECT count(*) FROM documents), (SELECT count(*) FROM postings)'
            )
            page_count = await self._db.value('PRAGMA page_count')
            page_size = await self._db.value('PRAGMA page_size')
        assert row is not None
        return StoreStats(
            path=self.path,
            conversations=row[0],
            entries=row[1],
            documents=row[2],
            postings=row[3],
            database_bytes=int(page_count) * int(page_size),
        )


if TYPE_CHECKING:
    # Makes pyright check that the store satisfies the protocols the activities, the search and the codec use.
    _CONFORMS: type[RecallStore] = SqliteConversationStore
    _IMPACT: type[ImpactReader] = SqliteConversationStore
    _BODIES: type[BodyStore] = SqliteConversationStore
