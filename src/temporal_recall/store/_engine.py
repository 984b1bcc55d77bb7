"""`EngineStore`: pydantic-ai's `ConversationStore` and the recall seams, written once over a driver's `Backend`.
More in docs/design/store.md.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar, NoReturn, Self

import numpy as np
from numpy.typing import NDArray
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationDetails,
    ConversationEntry,
    ConversationRecord,
)
from pydantic_ai.embeddings import Embedder
from pydantic_ai.exceptions import UserError
from pydantic_ai.run import AgentRunResult

from ..embeddings._index import embedded_save
from ..embeddings._source import EmbedderSource, as_embedder
from ..errors import UnknownEntry
from ._bodies import BodyEngine, StoredBodies
from ._checks import CheckedStore, check_append, check_id, check_optional_id, check_record, check_target
from ._freed_memory import keep_freed_memory
from ._reindex import reindex_store
from .index import _reader, _vectors
from .index._terms import prepare_message
from .index._tier_cache import TierCache
from .index._vectors import VectorKey
from .integrity import CheckReport, run_check
from .log import _append, _details, _entries, _write
from .log import _reads as _log
from .log._columns import record_columns, timestamp_order
from .log._details import details_columns
from .log._one_call import Known
from .log._save import save_after_own_appends
from .log._tenants import lock_tenants
from .postings._merger import Merger
from .protocol import (
    AppendRequest,
    AppendResult,
    DocumentRow,
    IndexStats,
    ListingPosition,
    RecordPage,
    SearchTarget,
    TargetPostings,
    TieredPostings,
    TierLookups,
)
from .sql._keys import hash_bytes, scope_key
from .sql._session import Backend, Session

__all__ = ('EngineStore', 'StoreSizes', 'refuse_unopened')


@dataclass(frozen=True, kw_only=True)
class StoreSizes:
    """The counts and size every store reports; each backend's stats add where the store is."""

    conversations: int
    entries: int
    """Stored messages: each message is stored once, however many conversations or branches share it."""
    documents: int
    postings: int
    database_bytes: int
    """What the database takes on disk for the store (each backend's stats say how it is measured)."""


def refuse_unopened(store: str, value: object, *, shown: str, noun: str, argument: str) -> NoReturn:
    """Refuse what a store class was given instead of an opened database, naming the coroutine to await.

    `shown` is how the value is quoted back in the fix (`'path.db'`; a URL is not: it may hold a password).
    """
    if isinstance(value, str | os.PathLike):
        raise TypeError(
            f'{store}({shown}) got {noun}, but a store is opened (connected, checked, migrated) '
            f'with an await: use `await open_store({shown})` or `await {store}.open({shown})`.'
        )
    raise TypeError(
        f'{store}() takes an opened database, not {type(value).__name__}; '
        f'use `await open_store(url)` or `await {store}.open({argument})`.'
    )


class EngineStore(CheckedStore, StoredBodies):
    """A `ConversationStore` that is also a `DeltaWriter` and an `IndexReader`.

    A subclass is a backend: it opens its driver's `Backend` and passes it to `__init__`.
    """

    _search_snapshot: ClassVar[bool] = True
    """Whether a search read runs in a snapshot. Free where the database is in-process (SQLite); a
    server would pay a BEGIN and a COMMIT round trip per read, so PostgreSQL reads without one."""

    def __init__(self, backend: Backend) -> None:
        keep_freed_memory()  # A search's arrays reused by the next one, not faulted in afresh (`_freed_memory`).
        self._backend = backend
        self._bodies = BodyEngine(backend)
        self._merger = Merger(backend)
        self._known = Known()
        self._signs = _vectors.VectorSigns()
        self._tiers = TierCache()
        self._embedder: Embedder | None = None

    @property
    def embedder(self) -> Embedder | None:
        """The store's embedder (`open_store(..., embedder=...)`, or set here: an `Embedder`, an `EmbeddingModel`
        or a model name such as `temporal_recall.embeddings.LOCAL_MODEL`); `None` by default.

        It embeds what pydantic-ai's `save` writes (a chat UI adapter's `conversation_store=` path), and it
        is the embedder of a `ConversationRecall(store=this store)` or a search of this store that has none
        of its own (nor a worker's). Without it, a save that writes messages into a store holding vectors
        embeds them with the model those vectors were made with, built by name (`embeddings._index`).
        """
        return self._embedder

    @embedder.setter
    def embedder(self, source: EmbedderSource | None) -> None:
        self._embedder = as_embedder(source)

    @staticmethod
    def _retry_delete(error: BaseException) -> bool:
        """Whether a failed delete transaction should run again: a backend whose writers run side by side
        answers yes when a concurrent write started referencing an entry the delete removed."""
        return False

    async def close(self) -> None:
        """Close the connections (after the merges running in the background). Safe to call twice; any
        later use raises `StoreUnavailable`."""
        await self._merger.settle()
        await self._backend.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.close()

    # --- ConversationStore --------------------------------------------------------------------------

    async def save(
        self, conversation: Conversation | AgentRunResult[Any], *, scope: str | None = None
    ) -> list[ConversationEntry]:
        """pydantic-ai's `save`, which also accepts a run whose own `ConversationRecall` stored its steps.

        When the stored revision differs from the conversation's only by that run's appends, the
        save writes what the store still lacks (usually only the record) instead of raising
        `ConversationConflict`, and returns the entries holding the run's messages (see `log/_save`).
        Any other change since the conversation was loaded still raises `ConversationConflict`.
        """
        saved = await save_after_own_appends(self, conversation, scope=scope)
        if saved is not None:
            return saved
        return await super().save(conversation, scope=scope)

    # --- ConversationStore primitives -------------------------------------------------------------

    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        check_id(conversation_id, 'conversation id')
        return await self._backend.run_read(lambda s: _log.read_record(s, conversation_id), snapshot=False)

    async def read_records(self, *, scope: str | None = None, limit: int | None = None) -> Sequence[ConversationRecord]:
        return await self._records(scope, limit, any_scope=scope is None)

    async def read_scoped_record(self, conversation_id: str, scope: str | None) -> ConversationRecord | None:
        """The record of a conversation stored under exactly `scope`, else `None`.

        pydantic-ai's `scope=None` means "any scope"; here `None` is the tenant of conversations stored
        without one, as in search, so a caller confined to a tenant can never widen it. The tenant is
        compared in the statement: another tenant's conversation costs what a missing one does.
        """
        check_id(conversation_id, 'conversation id')
        check_optional_id(scope, 'scope')
        key = scope_key(scope)
        return await self._backend.run_read(
            lambda s: _log.read_record(s, conversation_id, scope_key=key), snapshot=False
        )

    async def read_scoped_records(self, scope: str | None, *, limit: int | None = None) -> Sequence[ConversationRecord]:
        """The records stored under exactly `scope` (`None`: without one), newest first; see `read_scoped_record`."""
        return await self._records(scope, limit, any_scope=False)

    async def read_records_page(
        self, scope: str | None, *, any_scope: bool = False, limit: int, after: ListingPosition | None = None
    ) -> RecordPage:
        """Up to `limit` records newest first, of exactly `scope` (as `read_scoped_records`) or of every
        scope with `any_scope`, starting after `after` (see `ListingPosition`); the page says where the
        next one starts.

        Raises:
            UserError: `limit` is below 1.
            InvalidIdentifier: The scope or the position's conversation id is not a usable id.
        """
        if limit < 1:
            raise UserError('`limit` must be at least 1.')
        if after is not None:
            check_id(after.conversation_id, 'conversation id')
        records = await self._records(scope, limit + 1, any_scope=any_scope, after=after)
        page = list(records[:limit])
        if len(records) <= limit:
            return RecordPage(records=page, next=None)
        last = page[-1]
        position = ListingPosition(updated_order=timestamp_order(last.updated_at), conversation_id=last.conversation_id)
        return RecordPage(records=page, next=position)

    async def count_records(
        self, scope: str | None, *, any_scope: bool = False, after: ListingPosition | None = None
    ) -> int:
        """How many conversations `read_records_page` lists from `after` on (from the start without it)."""
        check_optional_id(scope, 'scope')
        if after is not None:
            check_id(after.conversation_id, 'conversation id')
        key = None if any_scope else scope_key(scope)
        return await self._backend.run_read(lambda s: _log.count_records(s, scope_key=key, after=after), snapshot=False)

    async def _records(
        self, scope: str | None, limit: int | None, *, any_scope: bool, after: ListingPosition | None = None
    ) -> Sequence[ConversationRecord]:
        """Records newest first: of `scope`'s tenant, or of every tenant with `any_scope`; after `after`."""
        if limit is not None and limit < 0:
            raise UserError('`limit` must not be negative.')
        check_optional_id(scope, 'scope')
        key = None if any_scope else scope_key(scope)
        return await self._backend.run_read(
            lambda s: _log.read_records(s, scope_key=key, limit=limit, after=after), snapshot=False
        )

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        """The entry with this id.

        Raises:
            UnknownEntry: No such entry (the exception is also a `LookupError`, as pydantic-ai expects).
            InvalidIdentifier: `entry_id` is too long or not printable text.
        """
        check_id(entry_id, 'entry id')
        entry = await self._backend.run_read(lambda s: _log.read_entry_row(s, entry_id), snapshot=False)
        if entry is None:
            raise UnknownEntry(entry_id)
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
        entries = await self._backend.run_read(lambda s: _log.history(s, head_id, limit), snapshot=False)
        if entries is None:
            raise UnknownEntry(head_id)
        return entries

    async def write_record(
        self,
        record: ConversationRecord,
        *,
        new_entries: Sequence[ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:
        """Store `record`, its `new_entries` and their index rows in one transaction.

        The revision check happens inside the transaction (on PostgreSQL after locking the
        conversation's row, so of two writers that loaded the same revision exactly one succeeds), so a
        conflict leaves nothing behind. A record created over entries that are already stored (a fork)
        gets those entries indexed into its membership; documents are per scope, so a fork into another
        scope gets its own. Entry ids are immutable: an entry whose id is already stored is not written again.

        The new entries' documents get vectors as a step's do (`embeddings._index.embedded_save`): embedded
        before the transaction with the store's `embedder`, else with the model the store's vectors were
        made with, and stored after it.

        Raises:
            ConversationConflict: The stored revision is not `expected_revision` (or the conversation was
                created concurrently), or the head, a branch or a new entry's parent names an entry that
                is not stored (a concurrent delete released it).
            MessageNotSerializable: A message cannot be stored as JSON (checked before anything is written).
            EmbeddingUnavailable: The store's `embedder` failed on the new documents; nothing was written.
        """
        check_record(record, new_entries)
        prepared = [prepare_message(entry.message) for entry in new_entries]
        columns = record_columns(record)

        async def write() -> None:
            await _write.write_record(
                self._backend, record, new_entries, prepared, columns, expected_revision, self._merger.due
            )

        if not new_entries:
            return await write()
        # With an embedder (the store's own, else its vectors' model), the new documents get vectors too.
        await embedded_save(self, record.scope, [entry.message for entry in new_entries], write)

    async def write_details(
        self,
        conversation_id: str,
        details: ConversationDetails,
        *,
        expected_revision: str,
        expected: ConversationDetails | None = None,
    ) -> ConversationRecord:
        """Replace the conversation's `title` or `metadata`, or both, keeping its revision and `updated_at`.

        Checked and written in one `UPDATE` (see `log/_details`); no save or append writes these
        columns, so an update outlives every later save.

        Raises:
            ConversationConflict: No record with `expected_revision` and the `expected` values is stored.
            InvalidIdentifier: A title that is not text, or metadata that is not a JSON object.
        """
        check_id(conversation_id, 'conversation id')
        details_columns(details, what='details')  # Refused before a transaction is opened.

        async def body(session: Session) -> ConversationRecord:
            await _details.write_details(
                session, conversation_id, details, expected_revision=expected_revision, expected=expected or {}
            )
            record = await _log.read_record(session, conversation_id)
            assert record is not None  # The update above found its row, in this transaction.
            return record

        return await self._backend.run_write(body)

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        """Delete a conversation and everything only it holds, in one transaction.

        Removed: the record; the entries no remaining record reaches (through its head or any of its
        branches), so a fork, or a conversation this one was forked from, keeps every entry it shares;
        the conversation's index membership; the documents no other conversation of the same scope
        still holds, with their postings; and the idempotency keys of its appends. If a concurrent
        write starts sharing an entry the delete was about to remove, the delete is retried and keeps it.

        Kept: entries other conversations reach, their documents, and the interned vocabulary
        (`terms`) and run ids, which `reindex` prunes. SQLite is built with `SECURE_DELETE` in the
        standard Python builds, overwriting freed pages; check `PRAGMA secure_delete` if erasure of
        the bytes on disk matters.

        Raises:
            ConversationConflict: No record with `expected_revision` is stored.
        """
        check_id(conversation_id, 'conversation id')

        async def body(session: Session) -> None:
            # First the conversation's row, locked as every write locks it, then its tenant's: the order
            # every write takes, so a delete queues behind a concurrent append instead of deadlocking.
            row = await _entries.conversation_row(session, conversation_id)
            if row is None or row.revision != expected_revision:
                raise ConversationConflict(conversation_id)
            await lock_tenants(session, [row.tenant_id], exclusive=True)
            await _log.delete_conversation(session, row.conv_key)

        await self._backend.run_write(body, retry=self._retry_delete)

    # --- DeltaWriter ------------------------------------------------------------------------------

    async def append(self, request: AppendRequest) -> AppendResult:
        """Apply one step boundary's delta in a single transaction, index included (see `log._append`).

        Raises:
            UnknownConversation: The conversation is missing (and `create=False`) or has another scope.
            HistoryMismatch: The delta does not follow the stored history; resend with `base_length=0`.
            MessageNotSerializable: A message cannot be stored as JSON (nothing is written).
            InvalidIdentifier: The conversation id, scope or run id is too long or not printable text.
        """
        check_append(request)
        return await _append.append(self._backend, request, self._merger.due, self._known)

    # --- IndexReader -------------------------------------------------------------------------------

    # Each call resolves its target and reads in one backend call (on SQLite one thread hop). A write
    # landing between two calls only makes the later answer that of a moment later; the target is
    # enforced again inside every query.

    async def _search(self, read: Callable[[Session], Any]) -> Any:
        return await self._backend.run_read(read, snapshot=self._search_snapshot)

    async def index_stats(self, target: SearchTarget) -> IndexStats | None:
        check_target(target)
        return await self._search(lambda s: _reader.index_stats(s, target))

    async def target_postings(self, target: SearchTarget, terms: Sequence[str]) -> TargetPostings | None:
        check_target(target)  # A search starts here.
        return await self._search(lambda s: _reader.target_postings(s, target, terms))

    async def tiered_postings(
        self, target: SearchTarget, terms: Sequence[str], lookups: TierLookups
    ) -> TieredPostings | None:
        check_target(target)  # A search starts here.
        return await self._search(lambda s: _reader.tiered_postings(s, target, terms, lookups, self._tiers))

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
        return await self._search(
            lambda s: _reader.documents(s, target, doc_ids, context=context, limit=limit, exclude_run_id=exclude_run_id)
        )

    async def document_frequencies(self, target: SearchTarget, terms: Sequence[str]) -> dict[str, int] | None:
        return await self._search(lambda s: _reader.document_frequencies(s, target, terms))

    # --- VectorIndex (store.index._vectors) -----------------------------------------------------------

    async def vectors_missing(
        self, scope: str | None, keys: Sequence[tuple[str, str]]
    ) -> tuple[tuple[str, int] | None, list[tuple[str, str]]]:
        check_optional_id(scope, 'scope')
        stored = {(hash_bytes(content), role): (content, role) for content, role in keys}

        async def body(session: Session) -> tuple[tuple[str, int] | None, list[VectorKey]]:
            return await _vectors.space(session), await _vectors.without_vectors(session, scope, list(stored))

        space, missing = await self._backend.run_read(body, snapshot=False)
        return space, [stored[key] for key in missing]

    async def add_vectors(
        self,
        scope: str | None,
        model: str,
        components: NDArray[np.int8],
        scales: NDArray[np.float32],
        keys: Sequence[tuple[str, str]],
    ) -> None:
        check_optional_id(scope, 'scope')

        async def body(session: Session) -> None:
            tenant_id = await _vectors.existing_tenant(session, scope)
            if tenant_id is not None:
                rows = [(tenant_id, hash_bytes(content), role) for content, role in keys]
                await _vectors.put_vectors(session, model, components, scales, rows)

        await self._backend.run_write(body)

    async def reembed(
        self,
        model: str,
        embed: Callable[[Sequence[str]], Awaitable[_vectors.Quantized]],
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Give every document a vector of `model`, replacing another model's (see `index._vectors.reembed`)."""
        return await _vectors.reembed(self._backend, model, embed, progress)

    async def nearest(
        self, target: SearchTarget, model: str, query: NDArray[np.float32], limit: int
    ) -> tuple[list[tuple[int, float]], int] | None:
        check_target(target)
        return await self._search(lambda s: _vectors.nearest(s, target, model, query, limit, self._signs))

    # --- Maintenance ------------------------------------------------------------------------------

    async def reindex(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Rebuild the index from the log, tenant by tenant; returns the number of documents.

        The rebuild replays membership in the order the writes happened, so document ids keep the
        incremental order (the ranking tie-break). One exception: a document whose first appearance
        was in a since-deleted conversation is ordered by its first surviving appearance.
        `progress(done, total)` is called as (conversation, entry) memberships are replayed. Each
        tenant is rebuilt in a transaction of its own, which its writers wait for and its searches see
        whole or not at all; a run that stops resumes with the next tenant (see `_reindex`).
        """
        return await reindex_store(self._backend, str(getattr(self, 'url', type(self).__name__)), progress)

    async def check(self, progress: Callable[[str], None] | None = None) -> CheckReport:
        """Verify the store's integrity in one read snapshot (see `integrity`); writers are not blocked."""
        return await self._backend.run_read(lambda s: run_check(s, progress))

    async def _sizes(self, size_sql: str, *params: object) -> dict[str, int]:
        """The counts every store's stats report, and `database_bytes` as `size_sql` (a scalar subquery) measures it."""
        sql = (
            'SELECT (SELECT count(*) FROM conversations), (SELECT count(*) FROM entries), '  # noqa: S608
            f'(SELECT count(*) FROM documents), (SELECT coalesce(sum(count), 0) FROM posting_blocks) '
            f'+ (SELECT coalesce(sum(postings), 0) FROM index_segments), ({size_sql})'
        )

        async def body(session: Session) -> Any:
            return await session.one(sql, *params)

        row = await self._backend.run_read(body)
        assert row is not None
        names = ('conversations', 'entries', 'documents', 'postings', 'database_bytes')
        return {name: int(value) for name, value in zip(names, row, strict=True)}
