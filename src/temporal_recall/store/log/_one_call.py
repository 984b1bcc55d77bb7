"""A plain append in one call, where each statement is a round trip: one statement that checks what the
append was computed from still holds and writes it, or writes nothing.

The general append (`_append.apply`) sends six statements or more, plus `BEGIN` and `COMMIT`, and on
a network database each costs a round trip and the client's work around it. Most appends are plain:
the next step after the head (or a new conversation's first), in a conversation without kept
branches, whose contents no other message of the tenant holds. For those this module computes every
row in Python from what it knows of the conversation, and calls the store's function (migration 16),
which takes the locks the general append takes, in its order, checks everything the rows were
computed from, and writes them. What it knows comes from a read without locks, or from this
process's last one-call append to the conversation (`Known`), which saves the read: the call checks
it all the same, so a stale entry costs only a call that writes nothing. Anything else, and anything
that changed, goes to the general append: this path never stores or answers what the general one
would not. More in docs/design/store.md.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pydantic_ai.usage import RunUsage

from ..index._documents import ordered_content_locks
from ..index._numbered import NumberedDocuments, merge_due
from ..index._terms import DOCUMENTS_PER_ENTRY
from ..protocol import AppendResult
from ..sql._keys import scope_key
from ..sql._session import Backend, Session
from ._columns import dump_usage, load_usage, timestamp_order
from ._ids import new_id, now
from ._lineage import appended_revision

if TYPE_CHECKING:
    from ._prepared import Prepared

__all__ = ('Known', 'OneCall', 'append_in_one_call')

KNOWN_CONVERSATIONS = 4096
"""The most conversations `Known` keeps, the least recently appended to dropped first."""
KNOWN_TERMS = 100_000
"""The most term ids `Known` keeps; past it, it starts again empty."""

_READ = 'SELECT * FROM temporal_recall_append_state($1, $2, $3, $4, $5, $6, $7)'
"""What a plain append needs to know, read without locks (migration 16's second function): the
conversation, or its scope's tenant when there is none yet; whether the general append must apply the
write; the ids of the append's words the store has."""

_INTERN = """
WITH new_terms AS (
    INSERT INTO terms (term)
    SELECT x.value FROM unnest($1::text[]) AS x(value)
    WHERE (SELECT t.term_id FROM terms t WHERE t.term = x.value) IS NULL
    ORDER BY x.value COLLATE "C"
    ON CONFLICT (term) DO NOTHING RETURNING term, term_id
)
SELECT n.term, n.term_id FROM new_terms n
UNION ALL
SELECT t.term, t.term_id FROM terms t WHERE t.term = ANY($1::text[])
"""
"""The ids of words this process does not know, in one statement: those the store has, and the rest
interned, in sorted order as every writer interns them (`_bulk.intern`) and committed at once (a key
nothing uses is harmless: `reindex` prunes it). Only words the store lacks reach the insert, because a
conflicting row still draws a key from the sequence. A word a concurrent writer interned after this
statement's snapshot is in neither half: the general append reads it."""

_CALL = f'SELECT temporal_recall_append({", ".join(f"${index}" for index in range(1, 37))})'
"""The call of migration 16's function, its 36 parameters in order (`_parameters`)."""


@dataclass(frozen=True)
class OneCall:
    """What `append_in_one_call` did: the append's result, and its tenant when its segments are due a merge."""

    result: AppendResult
    merge_tenant: int | None


@dataclass(frozen=True)
class _Conversation:
    """A conversation as a plain append finds it (`conv_key` `None`: there is none yet, and `tenant_id`
    is its scope's, if that has one)."""

    conv_key: int | None
    tenant_id: int | None
    scope: str | None
    head_key: int | None
    head_position: int
    head_hash: bytes | None
    revision: str | None
    usage: str | None

    def takes(self, prepared: Prepared) -> bool:
        """Whether the general append would apply `prepared` here as a plain append: after the head, or
        as a new conversation's first messages."""
        request = prepared.request
        if self.conv_key is None:
            return request.create and request.base_length == 0 and self.tenant_id is not None
        return (
            self.scope == request.scope
            and self.head_position == request.base_length - 1
            and (request.base_length == 0 or self.head_hash == prepared.base_hash)
        )


class Known:
    """What this process learned from its own one-call appends: each conversation as its last one left
    it, and term ids. The call checks every value it is given, so an entry another writer made stale
    costs one call that writes nothing; a call that wrote nothing drops what it was given."""

    def __init__(self) -> None:
        self.conversations: OrderedDict[str, _Conversation] = OrderedDict()
        self.terms: dict[str, int] = {}

    def conversation(self, conversation_id: str) -> _Conversation | None:
        found = self.conversations.get(conversation_id)
        if found is not None:
            self.conversations.move_to_end(conversation_id)
        return found

    def learn(self, conversation_id: str, conversation: _Conversation, terms: dict[str, int]) -> None:
        self.conversations[conversation_id] = conversation
        self.conversations.move_to_end(conversation_id)
        while len(self.conversations) > KNOWN_CONVERSATIONS:
            self.conversations.popitem(last=False)
        if len(self.terms) + len(terms) > KNOWN_TERMS:
            self.terms.clear()
        self.terms.update(terms)

    def forget(self, conversation_id: str) -> None:
        """After a call that wrote nothing: what it was given may be stale (a reindex renumbers terms)."""
        self.conversations.pop(conversation_id, None)
        self.terms.clear()


async def append_in_one_call(backend: Backend, prepared: Prepared, known: Known) -> OneCall | None:
    """Apply `prepared` in one call when it is a plain append (see the module notes); `None` when the
    general append must apply it: the request is not plain, or what it was computed from changed.

    The read, the interning of new words and the call go on one connection, each statement its own
    transaction."""
    request = prepared.request
    items = prepared.messages
    indexed = [item.content_hash for item in items if item.terms]
    if not items or len(set(indexed)) != len(indexed):  # A content said twice is counted: the general append.
        return None
    words = sorted({word for item in items for terms in item.terms for word in terms.frequencies})
    ids = [new_id() for _ in items]

    async def body(session: Session) -> tuple[_Conversation, dict[str, int], Any] | None:
        conversation = known.conversation(request.conversation_id)
        terms = {word: known.terms[word] for word in words if word in known.terms}
        if conversation is None or not conversation.takes(prepared):
            # Not known here, or another process appended since this one did: read it as it is now.
            read = await _read(session, prepared, indexed, words)
            if read is None:
                return None
            conversation, found = read
            terms.update(found)
        if not conversation.takes(prepared) or not await _interned(session, terms, words):
            return None
        after = _after(prepared, conversation)
        answer = await session.value(_CALL, *_parameters(prepared, conversation, after, ids, words, terms, indexed))
        return after, terms, answer

    done = await backend.run_write(body, autocommit=True)
    if done is None:
        return None
    after, terms, answer = done
    if answer is None:
        known.forget(request.conversation_id)
        return None
    base, conv_key, *pending = (int(value) for value in answer)
    after = replace(after, conv_key=conv_key, head_key=base + len(items) - 1)
    known.learn(request.conversation_id, after, terms)
    result = AppendResult(
        conversation_id=request.conversation_id, head_id=ids[-1], length=after.head_position + 1, stored=len(items)
    )
    return OneCall(result=result, merge_tenant=after.tenant_id if pending and merge_due(*pending) else None)


async def _read(
    session: Session, prepared: Prepared, indexed: list[bytes], words: list[str]
) -> tuple[_Conversation, dict[str, int]] | None:
    """`_READ`: the conversation and the ids of the words the store has; `None` when the general append
    must apply the write."""
    request = prepared.request
    fence = request.fence
    row = await session.one(
        _READ,
        request.conversation_id,
        request.idempotency_key,
        prepared.fence_key,
        None if fence is None else fence.attempt,
        indexed,
        words,
        scope_key(request.scope),
    )
    assert row is not None  # one row, found or not
    if row[8]:
        return None
    conversation = _Conversation(
        conv_key=row[0],
        tenant_id=row[1],
        scope=row[2],
        head_key=row[3],
        head_position=int(row[4]),
        head_hash=None if row[5] is None else bytes(row[5]),
        revision=row[6],
        usage=row[7],
    )
    return conversation, dict(zip(row[9], row[10], strict=True))


async def _interned(session: Session, terms: dict[str, int], words: list[str]) -> bool:
    """Add to `terms` the ids of the words it lacks, interning those the store lacks too; whether it
    holds every word's id then."""
    missing = [word for word in words if word not in terms]
    if not missing:
        return True
    terms.update((str(row[0]), int(row[1])) for row in await session.rows(_INTERN, missing))
    return len(terms) == len(words)


def _after(prepared: Prepared, conversation: _Conversation) -> _Conversation:
    """The conversation after the append, but for the keys the call draws: its head, usage and revision."""
    request, items = prepared.request, prepared.messages
    if conversation.usage is None:  # A new conversation: its usage is the request's.
        usage = dump_usage(request.usage if request.usage is not None else RunUsage())
    elif request.usage is not None:
        counted = load_usage(conversation.usage)
        counted.incr(request.usage)
        usage = dump_usage(counted)
    else:
        usage = conversation.usage
    return replace(
        conversation,
        scope=request.scope,
        head_position=conversation.head_position + len(items),
        head_hash=items[-1].content_hash,
        revision=appended_revision(conversation.revision, conversation.head_position + 1, request.run_id),
        usage=usage,
    )


def _parameters(
    prepared: Prepared,
    conversation: _Conversation,
    after: _Conversation,
    ids: list[str],
    words: list[str],
    terms: dict[str, int],
    indexed: list[bytes],
) -> tuple[Any, ...]:
    """The function's parameters: what the rows were computed from (checked again), then the rows."""
    request, items = prepared.request, prepared.messages
    assert conversation.tenant_id is not None  # `_Conversation.takes`
    updated_at = now()
    documents = NumberedDocuments.of(items, terms)
    return (
        conversation.conv_key,
        request.conversation_id,
        conversation.tenant_id,
        request.scope,
        conversation.head_key,
        conversation.revision,
        conversation.usage,
        request.idempotency_key,
        prepared.fence_key,
        None if request.fence is None else request.fence.attempt,
        words,
        [terms[word] for word in words],
        *ordered_content_locks(conversation.tenant_id, indexed),
        indexed,
        ids,
        [item.content_hash for item in items],
        [item.run_id for item in items],
        [item.message_json for item in items],
        [item.unindexed for item in items],
        conversation.head_position + 1,
        documents.offsets,
        documents.entries,
        documents.lengths,
        documents.terms,
        documents.roles,
        DOCUMENTS_PER_ENTRY,
        *documents.segment(),
        len(documents.postings.term_ids),
        after.usage,
        after.revision,
        updated_at.isoformat(),
        timestamp_order(updated_at),
    )
