"""The seams between the store, the search layer and the persistence capability. More in docs/design/store.md."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, NamedTuple, Protocol, runtime_checkable

from pydantic_ai.conversation_store import ConversationEntry, ConversationRecord
from pydantic_ai.messages import ModelMessage
from pydantic_ai.usage import RunUsage

from temporal_recall._renamed import warn_renamed_argument
from temporal_recall.embeddings._protocol import VectorWrites

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from temporal_recall.text._documents import SummaryRule

__all__ = (
    'BODY_TOUCH_INTERVAL',
    'FENCE_PREFIX',
    'AppendRequest',
    'AppendResult',
    'BodyStore',
    'DeltaWriter',
    'DocumentRow',
    'Fence',
    'IndexReader',
    'IndexStats',
    'ListingPosition',
    'Posting',
    'PostingColumns',
    'RecallStore',
    'RecordPage',
    'SearchTarget',
    'TargetPostings',
    'TierLookups',
    'TieredIndex',
    'TieredPostings',
    'VectorIndex',
)


FENCE_PREFIX = 'fence:'
"""Where a `Fence` is kept: a row of the idempotency table whose key is this prefix plus the fence key,
and whose `length` column holds the highest attempt seen (so fences need no table of their own)."""


@dataclass(frozen=True, kw_only=True)
class AppendRequest:
    """Messages to add to a conversation at one step boundary.

    The new messages follow the first `base_length` messages of the conversation's current history,
    the last of which has content hash `base_hash`. When the stored history's entry at position
    `base_length - 1` has that hash, the messages attach there: at the head they extend the
    conversation, earlier they branch off it (the old head is kept in `branches`). When it does not,
    the store raises `HistoryMismatch` and the writer resends with `base_length=0` and every message
    of its history, from which the store appends only what its stored history lacks (branching at
    the first difference, as `ConversationStore.save` does). Requests no response separates count as
    one message, as a run holds them (`store/log/_pending.py`).
    """

    conversation_id: str
    scope: str | None
    """The tenant scope, from trusted context. A conversation stored with another scope is treated
    as absent: the append raises `UnknownConversation` (it never reveals or changes the other)."""
    idempotency_key: str
    """Derived from workflow state (workflow id, run id, boundary number). A key already applied
    returns the result recorded the first time and stores nothing. Keys starting with `FENCE_PREFIX`
    are reserved for the store's fences."""
    base_length: int
    base_hash: str | None
    messages: Sequence[ModelMessage]
    run_id: str | None = None
    """The agent run these messages came from, recorded on index rows for `run_id` filters."""
    usage: RunUsage | None = None
    """Usage to add to the conversation record, once per idempotency key."""
    create: bool = True
    """Whether a missing conversation is created; `False` raises `UnknownConversation` instead."""
    fence: Fence | None = None
    """Refuse this write if a later attempt of the same unit already wrote (see `Fence`)."""
    summary: SummaryRule | None = None
    """The application's own rule for summary messages (`ConversationRecall(summary=...)`): a message it
    accepts is stored marked as such and never indexed."""
    base_resent_hash: str | None = None
    """`content.resent_hash` of the message the delta follows, for a history a chat UI sent back:
    the attach point then also matches a message of an earlier run that differs only in what a UI
    round trip changes (see `_append`)."""
    content_hashes: Sequence[str] | None = None
    """`content.content_hash` of each of `messages`, in order, when the caller computed them already (the
    capability does, for the marker its model request returns): the store files the messages under
    these instead of serialising each one again. Only for callers that made them with `content_hash`
    from these very messages; `None` (the default) makes the store compute them.

    Checked here, when the request is made: everything that reads the request (the store, the
    embedding of its documents before the write) may pair them with `messages` one for one."""

    def __post_init__(self) -> None:
        hashes = self.content_hashes
        if hashes is not None and len(hashes) != len(self.messages):
            raise ValueError(
                f'AppendRequest.content_hashes holds {len(hashes)} hashes for {len(self.messages)} messages; '
                'give one per message, in order, or None.'
            )


@dataclass(frozen=True, kw_only=True)
class Fence:
    """Orders the attempts of one retried unit of work (a Temporal activity) that writes to a conversation.

    A retried activity can still be running on a worker that was cut off when a later attempt starts
    elsewhere, and its write may land after the later attempt's. The store keeps, per conversation and
    `key`, the highest `attempt` it has seen, in the same transaction as the write: a write whose
    attempt is lower stores nothing and returns `fenced=True`. An equal or higher attempt proceeds
    (and raises the recorded attempt), so a later attempt always supersedes an earlier one.
    """

    key: str
    """The unit's identity across its attempts, e.g. `workflow id/run id/activity id`."""
    attempt: int
    """1 for the first attempt, as Temporal numbers them."""


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
    fenced: bool = False
    """True when a later attempt of the same unit had already written: nothing was stored."""


def fence_row_key(request: AppendRequest) -> str | None:
    """The idempotency-table key holding `request`'s fence (checking its own key avoids the reserved prefix)."""
    if request.idempotency_key.startswith(FENCE_PREFIX):
        raise ValueError(
            f'Idempotency keys starting with {FENCE_PREFIX!r} are reserved for fences: {request.idempotency_key!r}.'
        )
    return None if request.fence is None else FENCE_PREFIX + request.fence.key


class DeltaWriter(Protocol):
    async def append(self, request: AppendRequest) -> AppendResult:
        """Apply one step boundary's delta in a single transaction, index included.

        Order of checks: scope, then the fence (a lower attempt stores nothing), then the idempotency
        key (a key already applied returns its recorded result), then the attach point.
        """
        ...


@dataclass(frozen=True, kw_only=True)
class ListingPosition:
    """Where a page of the conversation listing ended: its last conversation's place in the listing's order.

    The listing is ordered by when a conversation was last updated, newest first (`updated_order`,
    microseconds since the epoch), equal times in creation order. A page read after a position holds
    exactly the conversations that come after it in that order, whatever was written meanwhile: one
    updated since moves to the front (a listing from the start shows it), one deleted is gone, and
    none of the others is skipped or shown twice. The conversation id stands for the tie-break, so a
    position holds nothing its reader was not shown.
    """

    updated_order: int
    conversation_id: str


@dataclass(frozen=True, kw_only=True)
class RecordPage:
    """A page of the conversation listing (`read_records_page`)."""

    records: list[ConversationRecord]
    next: ListingPosition | None
    """Where the next page starts; `None` when no conversation comes after this page."""


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
    """Only documents of this speaker (`part_role`): a narrowing applied to postings and rows alike. The
    stats stay the target's without it, so a filter changes which documents are hits, not their scores."""
    include_superseded: bool = False
    """Also what was superseded inside one agent run (an answer a retried request replaced, see
    `index._superseded`); by default a search sees everything else each conversation stored, its head's
    history and every branch it left."""
    include_branches: bool = False
    """Deprecated: the old name of `include_superseded`."""

    def __post_init__(self) -> None:
        if self.include_branches:
            warn_renamed_argument('SearchTarget', 'include_branches', 'include_superseded', stacklevel=4)
            object.__setattr__(self, 'include_superseded', True)


@dataclass(frozen=True, kw_only=True)
class IndexStats:
    document_count: int
    total_length: int


class Posting(NamedTuple):
    """One document's entry in a term's posting list, as `search.rank` (the reference ranking) and a
    block's decoding (`recall check`) take it; a search reads `PostingColumns`."""

    doc_id: int
    """Also the tie-break order: documents indexed earlier have smaller ids."""
    term_frequency: int
    length: int


class PostingColumns(NamedTuple):
    """A posting list as three aligned arrays, ascending `doc_ids`: what a search scores at C speed."""

    doc_ids: NDArray[np.int64]
    term_frequencies: NDArray[np.uint32]
    lengths: NDArray[np.uint32]


@dataclass(frozen=True, kw_only=True)
class TargetPostings:
    """A search target's counters and its query terms' posting lists, read together."""

    stats: IndexStats
    columns: dict[str, PostingColumns]
    """Each term's postings among the target's documents, ascending ids (terms in no document left out)."""


@dataclass(frozen=True, kw_only=True)
class TieredPostings:
    """A scope-wide target's counters and what a pruned search reads of its query terms' lists
    (`store.postings._tiers`): each long list's top tier with a bound on the rest, the other lists whole."""

    stats: IndexStats
    known: dict[str, PostingColumns]
    """Postings read, ascending ids: a tiered term's tier and pending postings, every posting of the others."""
    frequencies: dict[str, int]
    """Each term's document frequency over the target (terms in no document left out)."""
    frontiers: dict[str, NDArray[np.uint32]]
    """The tiered terms' `(term frequency, least length)` pairs, shape `(n, 2)`: every posting of the term
    outside `known` has at most that frequency for some pair and at least that pair's length."""
    looked_up: dict[str, PostingColumns] = field(default_factory=dict[str, PostingColumns])
    """The postings of the documents the search asked for (`TieredIndex.tiered_postings`' `lookups`)."""
    deeper: frozenset[str] = frozenset()
    """The tiered terms whose list keeps a deeper tier not read yet: asking for one reads that tier, not the
    whole list."""


TierLookups = Callable[[TieredPostings], 'Mapping[str, NDArray[np.int64] | None] | None']
"""Given what has been read, what a search must read next to rank exactly: per tiered term the documents whose
postings of it to look up, or `None` to read further down its list: its deeper tier when it is in `deeper`
(which then replaces what was read of it, with that tier's frontier), otherwise its whole list (its frontier
dropped); `{}` when nothing more, `None` for every posting of every term."""


@runtime_checkable
class TieredIndex(Protocol):
    """A store whose long posting lists keep a top tier (`store.postings._tiers`): a scope-wide BM25 search
    reads the tiers, then only the postings that can still change its page."""

    async def tiered_postings(
        self, target: SearchTarget, terms: Sequence[str], lookups: TierLookups
    ) -> TieredPostings | None:
        """The target's counters and tiers, then (in the same read) the postings `lookups` asks for, or
        every posting (in `known`, with no frontiers) when it returns `None`. `None` for a target narrower
        than its tenant (a conversation, a run, a role), which `IndexReader.target_postings` serves."""
        ...


@dataclass(frozen=True, kw_only=True)
class DocumentRow:
    """One place a matching document was said in the searched conversation(s): an occurrence, a hit."""

    doc_id: int
    conversation_id: str
    entry_id: str
    run_id: str | None
    position: int
    message: ModelMessage
    timestamp: datetime | None = None
    role: str | None = None
    """Who said the document's words (`part_role`), which are those of that speaker in `message`;
    `None` for a reader that indexes whole messages."""
    neighbours: list[tuple[int, ModelMessage]] = field(default_factory=list[tuple[int, ModelMessage]])
    """`(position, message)` of entries around it in the same run, when context was asked for."""


class IndexReader(Protocol):
    async def index_stats(self, target: SearchTarget) -> IndexStats | None:
        """Document count and total length over the target, or `None` if the target's conversation
        does not exist in its scope (the caller reports that exactly like "no such conversation")."""
        ...

    async def target_postings(self, target: SearchTarget, terms: Sequence[str]) -> TargetPostings | None:
        """The target's stats (as `index_stats`) and each term's postings among its documents, in one read;
        `None` exactly when `index_stats` is."""
        ...

    async def document_frequencies(self, target: SearchTarget, terms: Sequence[str]) -> dict[str, int] | None:
        """How many of the target's documents hold each term (terms in none are left out), from counters
        kept at write time; `None` for a target narrower than its tenant (a conversation, a run, a role)."""
        ...

    async def documents(
        self,
        target: SearchTarget,
        doc_ids: Sequence[int],
        *,
        context: int = 0,
        limit: int | None = None,
        exclude_run_id: str | None = None,
    ) -> list[DocumentRow]:
        """A row per occurrence of `doc_ids` within the target, with up to `context` neighbours on each side.

        Documents in `doc_ids` order, each at every place of the conversation's current history
        where it was said (earliest first; see `index._occurrences`), an entry once per document, none said in
        `exclude_run_id`, at most `limit` rows."""
        ...


@runtime_checkable
class VectorIndex(VectorWrites, Protocol):
    """The vector arm of the index (`store.index._vectors`): written after a step's append (`VectorWrites`,
    what `embeddings` asks of a store), read by a search.

    A document's vector is keyed by its tenant's scope, its content hash (`content.content_hash`) and its role; the
    store holds the vectors of one embedding model, named as `embeddings.model_name_of` names it.
    """

    async def nearest(
        self, target: SearchTarget, model: str, query: NDArray[np.float32], limit: int
    ) -> tuple[list[tuple[int, float]], int] | None:
        """The target's `limit` documents nearest the unit vector `query`, best first, as `(doc_id, cosine)`,
        and how many of its documents have vectors; `None` exactly when `index_stats` is."""
        ...


BODY_TOUCH_INTERVAL = timedelta(hours=1)
"""How stale a body's last-use time may get: a `BodyStore` touches a body it writes or reads when its
recorded time is older than this (not at every read, which would make each read a write), and
`RecallDataCodec` re-writes a body it has cached when it last stored or read it longer ago than this.
So a body a history references was touched at most twice this long before the history was written
(once late by the store, once by the codec's cache); the prune margin (`_bodies.PRUNE_MARGIN`) is
far larger."""


class BodyStore(Protocol):
    """Where `RecallDataCodec` keeps the bodies it moves out of payloads, by scope and content hash.

    Writing or reading a body records when it was last used (at most `BODY_TOUCH_INTERVAL` late),
    which is what `prune_bodies` of the store classes goes by.
    """

    async def put_bodies(self, scope: str | None, bodies: dict[str, bytes]) -> None: ...

    async def get_bodies(self, scope: str | None, hashes: Sequence[str]) -> dict[str, bytes]: ...


class RecallStore(DeltaWriter, IndexReader, VectorIndex, Protocol):
    """What the activities need from a backend: delta writes, index reads, history reads, closing."""

    async def read_history(self, head_id: str | None, *, limit: int | None = None) -> list[ConversationEntry]: ...

    async def read_record(self, conversation_id: str) -> ConversationRecord | None: ...

    async def read_scoped_record(self, conversation_id: str, scope: str | None) -> ConversationRecord | None:
        """The record if the conversation is stored under exactly `scope` (`None`: without one), else `None`."""
        ...

    async def close(self) -> None: ...
