"""Read a store the way `recall` and the HTTP API do: list conversations, read one, search.

The one place their answers are built, and public API for your own code, so reading a transcript
needs no knowledge of the store's layout. Scope works as everywhere else: a conversation stored under
another scope answers exactly like a missing one (`UnknownConversation`); `ANY_SCOPE` is the
operator's view of every tenant, only for callers who may see them all.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal, Protocol, TypeAlias

from pydantic_ai.conversation_store import ConversationEntry, ConversationRecord
from pydantic_ai.messages import ModelMessage

from ._cursor import cursor_position, cursor_text
from ._renamed import deprecated_include_branches
from .embeddings import EmbedderSource
from .errors import InvalidSearchParameters, UnknownConversation
from .models import SearchRequest
from .search import Role, SearchMode, SearchResult, message_role, parse_query, transcript_text
from .search.plan import search_index
from .store import IndexReader, ListingPosition, RecordPage

__all__ = (
    'ANY_SCOPE',
    'Branch',
    'ConversationInfo',
    'ConversationPage',
    'QueryStore',
    'ScopeFilter',
    'Transcript',
    'TranscriptMessage',
    'list_conversation_page',
    'list_conversations',
    'read_conversation',
    'search_messages',
)


class _AnyScope(enum.Enum):
    ANY = 'any scope'


ANY_SCOPE: Final = _AnyScope.ANY
"""Every scope: the conversation under the scope it was stored with (for operators only)."""

ScopeFilter: TypeAlias = str | Literal[_AnyScope.ANY] | None
"""A tenant scope (`None`: stored without one), or `ANY_SCOPE`."""


class QueryStore(IndexReader, Protocol):
    """What these functions read: the search index, records and entry chains (both backends)."""

    async def list_conversations(
        self, *, scope: str | None = None, limit: int | None = None
    ) -> list[ConversationRecord]: ...

    async def read_record(self, conversation_id: str) -> ConversationRecord | None: ...

    async def read_scoped_record(self, conversation_id: str, scope: str | None) -> ConversationRecord | None: ...

    async def read_scoped_records(
        self, scope: str | None, *, limit: int | None = None
    ) -> Sequence[ConversationRecord]: ...

    async def read_records_page(
        self, scope: str | None, *, any_scope: bool = False, limit: int, after: ListingPosition | None = None
    ) -> RecordPage: ...

    async def count_records(
        self, scope: str | None, *, any_scope: bool = False, after: ListingPosition | None = None
    ) -> int: ...

    async def read_history(self, head_id: str | None, *, limit: int | None = None) -> list[ConversationEntry]: ...


@dataclass(frozen=True, kw_only=True)
class ConversationInfo:
    """A conversation as listed: `recall conversations` and `GET /api/v1/conversations`."""

    conversation_id: str
    scope: str | None
    updated_at: datetime
    head_id: str | None
    branches: int
    """How many branches it has left (histories kept after a rewrite)."""
    forked_from: str | None
    """The conversation it was forked from, if the caller's scope can read that one: a fork of another
    tenant's conversation (or of one since deleted) shows `None`, so a listing never names a
    conversation its reader could not open."""
    title: str | None = None
    """What the conversation is about, as `ConversationStore.update` set it (`None` until then)."""
    metadata: dict[str, Any] | None = None
    """The app's own metadata, as `ConversationStore.update` set it."""

    @classmethod
    def of(cls, record: ConversationRecord, *, forked_from: str | None) -> ConversationInfo:
        return cls(
            conversation_id=record.conversation_id,
            scope=record.scope,
            updated_at=record.updated_at,
            head_id=record.head_id,
            branches=len(record.branches),
            forked_from=forked_from,
            title=record.title,
            metadata=record.metadata,
        )


@dataclass(frozen=True, kw_only=True)
class TranscriptMessage:
    position: int
    entry_id: str
    role: str
    """`user`, `assistant`, `tool` or `system`."""
    text: str
    """What a reader should see: the searchable text plus the recall tool's returns and compaction
    summaries, which are stored but not indexed."""
    message: ModelMessage


@dataclass(frozen=True, kw_only=True)
class Branch:
    tip: str
    """The entry the branch ends at."""
    messages: list[TranscriptMessage]


@dataclass(frozen=True, kw_only=True)
class Transcript:
    conversation: ConversationInfo
    messages: list[TranscriptMessage]
    """The current branch, oldest first."""
    branches: list[Branch]
    """The branches it left, when asked for (`branches=True`); otherwise empty."""


def _messages(entries: Sequence[ConversationEntry]) -> list[TranscriptMessage]:
    return [
        TranscriptMessage(
            position=position,
            entry_id=entry.id,
            role=message_role(entry.message),
            text=transcript_text(entry.message),
            message=entry.message,
        )
        for position, entry in enumerate(entries)
    ]


async def _record(store: QueryStore, conversation_id: str, scope: ScopeFilter) -> ConversationRecord:
    if scope is ANY_SCOPE:
        record = await store.read_record(conversation_id)
    else:  # The tenant is compared by the store's statement: another tenant's id costs what an absent one does.
        record = await store.read_scoped_record(conversation_id, scope)
    if record is None:
        raise UnknownConversation(conversation_id)
    return record


async def _info(store: QueryStore, record: ConversationRecord, scope: ScopeFilter) -> ConversationInfo:
    """`record` as listed; its fork link only if `scope` can follow it (`ConversationInfo.forked_from`)."""
    source = record.forked_from
    if source is not None and scope is not ANY_SCOPE and await store.read_scoped_record(source, scope) is None:
        source = None
    return ConversationInfo.of(record, forked_from=source)


async def list_conversations(
    store: QueryStore, *, scope: ScopeFilter = ANY_SCOPE, limit: int | None = 20
) -> list[ConversationInfo]:
    """The conversations of `scope` (`None`: those stored without one), or of every scope with
    `ANY_SCOPE`, most recently updated first."""
    if scope is ANY_SCOPE:
        records = await store.list_conversations(limit=limit)
    else:
        records = await store.read_scoped_records(scope, limit=limit)
    return [await _info(store, record, scope) for record in records]


@dataclass(frozen=True, kw_only=True)
class ConversationPage:
    """A page of the listing: `recall conversations` and `GET /api/v1/conversations` with paging."""

    conversations: list[ConversationInfo]
    next_cursor: str | None
    """Pass it as `after` for the next page; `None` when no conversation comes after this page."""
    total: int | None = None
    """How many conversations the listing holds, when counted (`count=True`)."""
    remaining: int | None = None
    """How many come after this page, when counted."""


def _listing(scope: ScopeFilter) -> str:
    """The listing a cursor pages: one per scope, and one of every scope (`ANY_SCOPE`)."""
    if scope is ANY_SCOPE:
        return 'every scope'
    return 'no scope' if scope is None else f'scope {scope}'


async def list_conversation_page(
    store: QueryStore, *, scope: ScopeFilter = ANY_SCOPE, limit: int = 20, after: str | None = None, count: bool = False
) -> ConversationPage:
    """`list_conversations` a page at a time: up to `limit`, then the ones after the cursor `after`.

    The cursor is the `next_cursor` of the previous page, which stays good while conversations are
    written: the next page holds exactly those that come after the previous one in the order,
    whatever was added, updated or deleted meanwhile (one updated since moves to the front, where a
    listing from the start shows it; see `store.ListingPosition`). A cursor pages only the listing
    of the scope it came from. With `count`, the page also says how many the listing holds and how
    many come after it (counted as the page is read, so an estimate while others write).

    Raises:
        InvalidSearchParameters: `after` is not a cursor of this scope's listing, or `limit` is below 1.
        InvalidIdentifier: The scope is not a usable id.
    """
    listing = _listing(scope)
    position = None if after is None else cursor_position(after, listing)
    if limit < 1:
        raise InvalidSearchParameters(f'A page holds at least one conversation; got limit {limit}.')
    stored, every = (None, True) if scope is ANY_SCOPE else (scope, False)
    page = await store.read_records_page(stored, any_scope=every, limit=limit, after=position)
    total = remaining = None
    if count:
        total = await store.count_records(stored, any_scope=every)
        remaining = 0 if page.next is None else await store.count_records(stored, any_scope=every, after=page.next)
    return ConversationPage(
        conversations=[await _info(store, record, scope) for record in page.records],
        next_cursor=None if page.next is None else cursor_text(page.next, listing),
        total=total,
        remaining=remaining,
    )


async def read_conversation(
    store: QueryStore, conversation_id: str, *, scope: ScopeFilter, branches: bool = False
) -> Transcript:
    """The transcript of a conversation's current branch, and of the branches it left if asked.

    Raises:
        UnknownConversation: No such conversation in `scope` (also when it was deleted meanwhile).
        InvalidIdentifier: `conversation_id` is not a usable id.
    """
    record = await _record(store, conversation_id, scope)
    try:
        current = await store.read_history(record.head_id)
        kept = [(tip, await store.read_history(tip)) for tip in record.branches] if branches else []
    except LookupError:  # deleted between reading the record and its entries
        raise UnknownConversation(conversation_id) from None
    return Transcript(
        conversation=await _info(store, record, scope),
        messages=_messages(current),
        branches=[Branch(tip=tip, messages=_messages(entries)) for tip, entries in kept],
    )


async def search_messages(
    store: QueryStore,
    query: str,
    *,
    conversation_id: str | None,
    scope: ScopeFilter,
    run_id: str | None = None,
    role: Role | None = None,
    limit: int = 10,
    context: int = 0,
    include_superseded: bool = False,
    include_branches: bool | None = None,
    mode: SearchMode | None = None,
    embedder: EmbedderSource | None = None,
) -> SearchResult:
    """Search one conversation, or every conversation of `scope` with `conversation_id=None`.

    `run_id` keeps one agent run's messages, `role` one speaker's (`user`, `assistant`, `tool`, `system`).
    A conversation is searched with everything it stored, on its head and on every branch it left,
    except what was superseded inside one agent run (an answer a retried model request replaced);
    `include_superseded` adds that too. `include_branches` is its deprecated old name.
    With an `embedder` (the model the store's vectors came from: a pydantic-ai `Embedder`, an
    `EmbeddingModel` or a model name), `mode` may be `semantic` or `hybrid` (the default then);
    without one, a search is `bm25`.

    A scope without conversations gives no hits. The query is checked before anything is read, so
    an unusable one is refused whatever the store holds.

    Raises:
        InvalidQuery: The query is empty, too large or holds control characters.
        InvalidSearchParameters: `limit` or `context` out of range, an unknown role or mode, `ANY_SCOPE`
            without a conversation, or a search by meaning without an embedder.
        EmbeddingMismatch: The store's vectors came from another model than `embedder`.
        EmbeddingUnavailable: The embedding model failed on the query.
        UnknownConversation: No such conversation in `scope`.
        InvalidIdentifier: An id or the scope is not usable.
    """
    parse_query(query)
    if conversation_id is not None and scope is ANY_SCOPE:
        scope = (await _record(store, conversation_id, scope)).scope
    elif scope is ANY_SCOPE:
        raise InvalidSearchParameters('Searching every conversation needs one scope; ANY_SCOPE would mix tenants.')
    request = SearchRequest(
        query=query,
        conversation_id=conversation_id,
        all_conversations=conversation_id is None,
        scope=scope,
        run_id=run_id,
        role=role,
        limit=limit,
        context_lines=context,
        include_superseded=include_superseded or deprecated_include_branches('search_messages', include_branches),
        mode=mode,
    )
    try:
        return await search_index(store, request, embedder=embedder)
    except UnknownConversation:
        if conversation_id is not None:
            raise
        return SearchResult(query=query, hits=[], searched_documents=0, truncated_query=False)
