"""The seams between the store, the search layer and the persistence capability.

A backend (SQLite, PostgreSQL) is a `pydantic_ai.conversation_store.ConversationStore` plus the two
narrow protocols here: `DeltaWriter`, which the persistence capability's activity calls at every
step boundary, and `IndexReader`, which the search activity reads postings through. Ranking itself is
pure code in `temporal_recall.search`; a backend only fetches rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple, Protocol

from pydantic_ai.conversation_store import ConversationEntry, ConversationRecord
from pydantic_ai.messages import ModelMessage
from pydantic_ai.usage import RunUsage

if TYPE_CHECKING:
    from temporal_recall.search._documents import SummaryRule

__all__ = (
    'AppendRequest',
    'AppendResult',
    'DeltaWriter',
    'DocumentRow',
    'IndexReader',
    'IndexStats',
    'Posting',
    'RecallStore',
    'SearchTarget',
)


@dataclass(frozen=True, kw_only=True)
class AppendRequest:
    """Messages to add to a conversation at one step boundary.

    The new messages follow the first `base_length` messages of the conversation's current history,
    the last of which has content hash `base_hash`. When the stored history's entry at position
    `base_length - 1` has that hash, the messages attach there: at the head they extend the
    conversation, earlier they branch off it (the old head is kept in `branches`). When it does not,
    the store raises `HistoryMismatch` and the writer resends with `base_length=0` and every message
    of its history, from which the store appends only what its stored history lacks (branching at
    the first difference, as `ConversationStore.save` does).
    """

    conversation_id: str
    scope: str | None
    """The tenant scope, from trusted context. A conversation stored with another scope is treated
    as absent: the append raises `UnknownConversation` (it never reveals or changes the other)."""
    idempotency_key: str
    """Derived from workflow state (workflow id, run id, boundary number). A key already applied
    returns the result recorded the first time and stores nothing."""
    base_length: int
    base_hash: str | None
    messages: Sequence[ModelMessage]
    run_id: str | None = None
    """The agent run these messages came from, recorded on index rows for `run_id` filters."""
    usage: RunUsage | None = None
    """Usage to add to the conversation record, once per idempotency key."""
    create: bool = True
    """Whether a missing conversation is created; `False` raises `UnknownConversation` instead."""
    summary: SummaryRule | None = None
    """The application's own rule for summary messages (`ConversationRecall(summary=...)`): a message it
    accepts is stored marked as such and never indexed."""


@dataclass(frozen=True, kw_only=True)
class AppendResult:
    conversation_id: str
    head_id: str | None
    """The conversation's head entry after the append."""
    length: int
    """How many messages the conversation's current history holds after the append."""
    stored: int
    """How many new entries this append stored (0 for a replayed key or nothing new)."""
    replayed: bool = False
    """True when the idempotency key had already been applied."""


class DeltaWriter(Protocol):
    async def append(self, request: AppendRequest) -> AppendResult:
        """Apply one step boundary's delta in a single transaction, index included."""
        ...


@dataclass(frozen=True, kw_only=True)
class SearchTarget:
    """What a search may see. Built from trusted context only, never from model output.

    `conversation_id=None` means every conversation of `scope` (the explicit `all` scope). The scope
    must match a conversation's stored scope exactly, `None` included: search fails closed.
    """

    scope: str | None
    conversation_id: str | None
    run_id: str | None = None
    role: str | None = None
    """Only documents of this `message_role`: a narrowing applied to postings and rows alike. The
    stats stay the target's without it, so a filter changes which documents are hits, not their scores."""


@dataclass(frozen=True, kw_only=True)
class IndexStats:
    document_count: int
    total_length: int


class Posting(NamedTuple):
    """One document's entry in a term's posting list.

    A tuple rather than a dataclass: a search over a large scope builds tens of thousands of these,
    and a NamedTuple is built from a database row at C speed (`Posting._make(row)`).
    """

    doc_id: int
    """Also the tie-break order: documents indexed earlier have smaller ids."""
    term_frequency: int
    length: int


@dataclass(frozen=True, kw_only=True)
class DocumentRow:
    """Where a matching document first appeared in the searched conversation(s)."""

    doc_id: int
    conversation_id: str
    entry_id: str
    run_id: str | None
    position: int
    message: ModelMessage
    timestamp: datetime | None = None
    neighbours: list[tuple[int, ModelMessage]] = field(default_factory=list[tuple[int, ModelMessage]])
    """`(position, message)` of entries around it in the same run, when context was asked for."""


class IndexReader(Protocol):
    async def index_stats(self, target: SearchTarget) -> IndexStats | None:
        """Document count and total length over the target, or `None` if the target's conversation
        does not exist in its scope (the caller reports that exactly like "no such conversation")."""
        ...

    async def postings(self, target: SearchTarget, terms: Sequence[str]) -> dict[str, list[Posting]]:
        """For each term, its postings among the target's documents (terms with none may be omitted)."""
        ...

    async def documents(self, target: SearchTarget, doc_ids: Sequence[int], *, context: int = 0) -> list[DocumentRow]:
        """The rows for `doc_ids` within the target, with up to `context` neighbours on each side."""
        ...


class RecallStore(DeltaWriter, IndexReader, Protocol):
    """What the activities need from a backend: delta writes, index reads, history reads, closing."""

    async def read_history(self, head_id: str | None, *, limit: int | None = None) -> list[ConversationEntry]: ...

    async def read_record(self, conversation_id: str) -> ConversationRecord | None: ...

    async def close(self) -> None: ...
