"""`DeltaWriter.append`, written once: one step boundary's messages in one write transaction.

More in docs/design/store.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pydantic_ai.messages import ModelMessage, ModelRequest
from pydantic_ai.usage import RunUsage

from temporal_recall.content import load_message, resent_hash
from temporal_recall.errors import HistoryMismatch, UnknownConversation

from ..index._documents import add_members, content_locks, documents_with, read_documents, send_tail
from ..index._superseded import extend_head, follow_supersessions, record_supersession
from ..index._terms import Member, PreparedMessage, prepare_message
from ..protocol import AppendRequest, AppendResult
from ..sql._bulk import Batch, Tail
from ..sql._keys import run_id_of
from ..sql._session import Backend, Session
from . import _entries as entries
from . import _statements as statements
from ._columns import RecordColumns, dump_usage, load_usage, timestamp_order
from ._ids import new_id, now
from ._lineage import appended_revision
from ._one_call import Known, append_in_one_call
from ._pending import anchor, continues, requests_at, requests_ending_the_chain
from ._prepared import Prepared, prepare
from ._rows import ChainEntry, ConversationRow
from ._tenants import tenant_of

__all__ = ('append', 'apply')


async def append(
    backend: Backend, request: AppendRequest, merge_due: Callable[[int], None], known: Known
) -> AppendResult:
    """`DeltaWriter.append`: check and serialise `request`, then apply it in one call where the store can
    (`_one_call`), otherwise in one write transaction; then, if it left its tenant's segments due a
    merge, pass the tenant to `merge_due` (`postings._merger`). `known`: the store's `_one_call.Known`."""
    prepared = prepare(request)
    if backend.dialect.appends_in_one_call:
        done = await append_in_one_call(backend, prepared, known)
        if done is not None:
            if done.merge_tenant is not None:
                merge_due(done.merge_tenant)
            return done.result
    merging: list[int] = []
    result = await backend.run_write(
        lambda session: apply(session, prepared, merging), retry=entries.lost_creation_race
    )
    for tenant_id in merging:
        merge_due(tenant_id)
    return result


async def apply(session: Session, prepared: Prepared, merging: list[int]) -> AppendResult:
    """The whole append, inside the backend's write transaction; the tenant joins `merging` (emptied
    first: the body may run again) when its segments are due a merge after the commit.

    In steps: the conversation's row, locked; the scope and fence checks, and a replay, which answer
    without writing; where the new messages attach; their insert; the head they make; the write's
    last rows; what a branch left behind.
    """
    merging.clear()
    request = prepared.request
    row = await _locked_row(session, prepared)
    answered = await _checked(session, row, prepared)
    if answered is not None:
        return answered
    tenant_id = row.tenant_id if row is not None else await tenant_of(session, request.scope, lock=True)
    attach = await _attach(session, row, request, prepared.base_hash, [item.content_hash for item in prepared.messages])
    inserted = await _insert(session, row, tenant_id, _new_items(prepared, attach), attach)
    head = _Head.after(row, attach, inserted)
    if row is None:
        conv_key = await entries.insert_conversation(
            session, _new_columns(request), tenant_id=tenant_id, head_key=head.key, created_seq=inserted.created_seq
        )
    else:
        conv_key = row.conv_key
    if await _write_tail(session, row, conv_key, tenant_id, request, inserted, head):
        merging.append(tenant_id)
    if row is not None and inserted.members:
        await _record_branch(session, row, request, attach, head, inserted.members)
    if row is None and prepared.fence_key is not None:
        assert request.fence is not None
        await _raise_fence(session, conv_key, prepared.fence_key, request.fence.attempt)
    return AppendResult(
        conversation_id=request.conversation_id, head_id=head.id, length=head.length, stored=len(inserted.members)
    )


async def _locked_row(session: Session, prepared: Prepared) -> ConversationRow | None:
    """The conversation's row, locked (`None`: no such conversation), with what the write needs next.

    The read also takes the tenant's lock (a replay or a fenced write takes it for nothing: a shared
    lock, held for a transaction that ends at once) and the head's chain `_attach` reads.
    """
    request = prepared.request
    return await entries.conversation_row(
        session,
        request.conversation_id,
        idempotency_key=request.idempotency_key,
        fence_key=prepared.fence_key,
        lock_tenant=True,
        chain_from=max(request.base_length - 1, 0),
        runs={item.run_id for item in prepared.messages if item.run_id is not None},
        terms={word for item in prepared.messages for terms in item.terms for word in terms.frequencies},
    )


async def _checked(session: Session, row: ConversationRow | None, prepared: Prepared) -> AppendResult | None:
    """The scope and fence checks, and a replay: `None` when the write goes ahead.

    Another scope's conversation, and a missing one the request may not create, raise
    `UnknownConversation`. An attempt lower than one the fence recorded, and a key already applied,
    are answered without writing; otherwise the fence records the attempt.
    """
    request, fence_key = prepared.request, prepared.fence_key
    if row is None:
        if not request.create:
            raise UnknownConversation(request.conversation_id)
        return None
    if row.scope != request.scope:  # exactly: None and '' are different scopes
        raise UnknownConversation(request.conversation_id)
    if fence_key is not None:
        assert request.fence is not None
        highest = row.fence_attempt
        if highest is not None and highest > request.fence.attempt:
            return AppendResult(
                conversation_id=request.conversation_id,
                head_id=row.head_id,
                length=row.head_position + 1,
                stored=0,
                fenced=True,
            )
        await _raise_fence(session, row.conv_key, fence_key, request.fence.attempt)
    if row.applied is not None:
        head_id, length = row.applied
        return AppendResult(
            conversation_id=request.conversation_id, head_id=head_id, length=length, stored=0, replayed=True
        )
    return None


def _new_items(prepared: Prepared, attach: _Attach) -> list[PreparedMessage]:
    """The messages the store lacks, with what continues stored requests in place of the requests it continues."""
    request = prepared.request
    new_items = prepared.messages[attach.skipped :]
    if attach.first is None:
        return new_items
    first = prepare_message(attach.first, run_id=request.run_id, summary=request.summary)
    return [first, *new_items[attach.replaced :]]


@dataclass(frozen=True)
class _Inserted:
    """The entries an append inserted, in order, and what was read with them."""

    members: list[Member]
    ids: list[str]
    documents: Mapping[bytes, Sequence[tuple[int, int, str]]] | None
    """The tenant's documents of their contents, where they were read with the insert (`documents_with`)."""
    created_seq: int
    """For a new conversation, the highest entry key before the insert (where it is stored); otherwise 0."""


async def _insert(
    session: Session, row: ConversationRow | None, tenant_id: int, items: list[PreparedMessage], attach: _Attach
) -> _Inserted:
    """Insert `items` as a chain after the attach point, after the content locks of the indexed ones."""
    # Before the entries take their keys: the order of the keys is the order of the documents' creators.
    # With them, in one statement, where the conversation is stored (a new one reads the highest key first).
    locks = content_locks(session, tenant_id, (item.content_hash for item in items if item.terms))
    if locks is not None and (row is None or not items):
        await session.run(locks[0], *locks[1])
        locks = None
    created_seq = await entries.max_entry_key(session) if row is None else 0
    ids = [new_id() for _ in items]
    if not items:
        return _Inserted(members=[], ids=ids, documents=None, created_seq=created_seq)
    # The documents `add_members` looks up are read with the insert, after the content locks.
    read = documents_with(session.dialect, tenant_id, list(dict.fromkeys(item.content_hash for item in items)))
    known_runs = row.known_runs if row is not None else None
    members, found = await entries.insert_chain(
        session, items, ids, attach.parent_key, attach.parent_position, known_runs, read, locks
    )
    documents = read_documents(found) if read is not None else None
    return _Inserted(members=members, ids=ids, documents=documents, created_seq=created_seq)


@dataclass(frozen=True)
class _Head:
    """The conversation's head after an append."""

    key: int | None
    id: str | None
    length: int
    branched: bool
    """Whether the new entries branch away from the old head (which `branches` then keeps)."""

    @classmethod
    def after(cls, row: ConversationRow | None, attach: _Attach, inserted: _Inserted) -> _Head:
        if not inserted.members:
            if row is None:
                return cls(key=None, id=None, length=0, branched=False)
            return cls(key=row.head_key, id=row.head_id, length=row.head_position + 1, branched=False)
        last = inserted.members[-1]
        branched = row is not None and attach.parent_key != row.head_key
        return cls(key=last.entry_key, id=inserted.ids[-1], length=last.position + 1, branched=branched)


async def _write_tail(
    session: Session,
    row: ConversationRow | None,
    conv_key: int,
    tenant_id: int,
    request: AppendRequest,
    inserted: _Inserted,
    head: _Head,
) -> bool:
    """The write's last rows: the key's record, the conversation's row, the new entries' membership.

    They read nothing of each other, so they go in one statement (`Tail`), sent before anything reads
    the membership they add. Whether the tenant's segments are then due a merge after the commit.
    """
    tail = Tail('conversations', ('conv_key', conv_key))
    tail.batches.append(
        Batch(
            'applied_writes',
            statements.APPLIED_COLUMNS,
            [(conv_key, request.idempotency_key, head.key, head.length, len(inserted.members))],
        )
    )
    if row is not None and (inserted.members or request.usage is not None):
        await _move_head(
            session, row, head.key, branched=head.branched, usage=request.usage, run_id=request.run_id, tail=tail
        )
    merge = not session.dialect.supports_concurrent_writes
    due = await add_members(
        session,
        conv_key,
        tenant_id,
        inserted.members,
        merge=merge,
        terms=row.known_terms if row is not None else None,
        stored=inserted.documents,
        tail=tail,
    )
    return await send_tail(session, tail, tenant_id, merge=merge) or due


async def _record_branch(
    session: Session, row: ConversationRow, request: AppendRequest, attach: _Attach, head: _Head, members: list[Member]
) -> None:
    """The supersession marks after new entries in a stored conversation: a branch away from the head
    records that it replaced an earlier attempt's answer, or follows the marks recorded; entries
    extending a head with kept branches bring back the members they hold that were superseded."""
    if head.branched:
        displaced = attach.displaced
        if displaced is not None and await _replaces_earlier_attempt(session, request, displaced):
            await record_supersession(session, row.conv_key, row.tenant_id, displaced)
        else:
            await follow_supersessions(session, row.conv_key, row.tenant_id)
    elif row.branch_keys:
        await extend_head(session, row.conv_key, row.tenant_id, [member.entry_key for member in members])


async def _raise_fence(session: Session, conv_key: int, fence_key: str, attempt: int) -> None:
    """Record `attempt` for `fence_key` unless a higher one is recorded."""
    await session.run(
        'INSERT INTO applied_writes (conv_key, idempotency_key, head_key, length, stored) '  # noqa: S608
        'VALUES ($1, $2, NULL, $3, 0) ON CONFLICT (conv_key, idempotency_key) '
        f'DO UPDATE SET length = {session.dialect.greatest}(applied_writes.length, excluded.length)',
        conv_key,
        fence_key,
        attempt,
    )


async def _replaces_earlier_attempt(session: Session, request: AppendRequest, displaced: int) -> bool:
    """Whether the entries this write branched away from (from `displaced` down) were superseded inside
    one run: the write is a retry of a fenced unit (attempt 2 or later) and they are its run's own.

    Nothing else of the same run attaches where a request's response does: the run's later requests
    attach after that response, and a history the run rewrote is written from the workflow, unfenced.
    So the entries are an earlier attempt's answer, which Temporal discarded (`index._superseded`).
    """
    if request.fence is None or request.fence.attempt < 2 or request.run_id is None:
        return False
    same_run = await session.value(
        'SELECT 1 FROM entries e JOIN runs r ON r.run_key = e.run_key WHERE e.entry_key = $1 AND r.run_id = $2',
        displaced,
        request.run_id,
    )
    return same_run is not None


@dataclass(frozen=True)
class _Attach:
    """Where an append's new messages go, and which of its messages the store already holds."""

    parent_key: int | None
    parent_position: int
    skipped: int
    """How many of the request's messages, from the first, are already stored."""
    displaced: int | None = None
    """The stored entry that follows the attach point on the current history, which the new messages
    branch away from when there are any left to write."""
    first: ModelMessage | None = None
    """Stored instead of the `replaced` requests after the skipped ones: what they add to the stored
    requests they continue."""
    replaced: int = 0


async def _attach(
    session: Session,
    row: ConversationRow | None,
    request: AppendRequest,
    base_hash: bytes | None,
    hashes: list[bytes],
) -> _Attach:
    """Where the new messages go and how many are already stored.

    A message matches a stored one by content hash, or as one a chat UI sent back (`_resent`).
    Requests no response separates match as one message, as a run holds them (`_pending`): written
    and stored ones alike, and where no response followed the stored ones (a failed model call's), a
    request that begins with them, whose rest is then stored after them as a request of its own. A
    base counted that way is looked for at the end of the history (`anchor`).
    """
    base = request.base_length
    head_position = row.head_position if row is not None else -1
    if base - 1 > head_position:
        raise HistoryMismatch(
            f'Conversation {request.conversation_id!r} holds {head_position + 1} messages, fewer than the '
            f'{base} the delta follows; resend with base_length=0.'
        )
    if row is None or row.head_key is None:
        return _Attach(None, -1, 0)
    chain = row.chain if row.chain is not None else await entries.head_chain(session, row.head_key, base - 1)
    by_position = {entry.position: entry for entry in chain}
    parent = await _base_entry(session, request, chain, by_position, base_hash)
    return await _past_stored(session, request, chain, by_position, parent, hashes)


async def _base_entry(
    session: Session,
    request: AppendRequest,
    chain: list[ChainEntry],
    by_position: dict[int, ChainEntry],
    base_hash: bytes | None,
) -> tuple[int | None, int]:
    """The stored entry the write's messages follow, as `(entry_key, position)`; `(None, -1)` from the start.

    It is the chain's message at `base_length - 1` when that holds the base hash or a chat UI sent it
    back; otherwise the end of the history, counted as the writer counted it (`anchor`).
    """
    base = request.base_length
    if base == 0:
        return None, base - 1
    assert base_hash is not None
    stored = by_position[base - 1]
    if stored.content_hash == base_hash or await _resent(
        session, stored.entry_key, request.base_resent_hash, request.run_id
    ):
        return stored.entry_key, base - 1
    pending, before = await requests_ending_the_chain(session, chain)
    found = anchor(chain, pending, before, base_hash, base - 1)
    if found is None:
        raise HistoryMismatch(
            f'Message {base - 1} of conversation {request.conversation_id!r} is not the one the delta '
            'follows (its content hash differs); resend with base_length=0.'
        )
    return found.entry_key, found.position


async def _past_stored(
    session: Session,
    request: AppendRequest,
    chain: list[ChainEntry],
    by_position: dict[int, ChainEntry],
    parent: tuple[int | None, int],
    hashes: list[bytes],
) -> _Attach:
    """The attach point moved past the write's first messages the chain already holds after `parent`."""
    parent_key, parent_position = parent
    skipped = 0
    messages = request.messages
    while skipped < len(messages):
        following = by_position.get(parent_position + 1)
        if following is None:
            break
        if following.content_hash == hashes[skipped] or await _resent(
            session, following.entry_key, resent_hash(messages[skipped]), request.run_id
        ):
            parent_key, parent_position = following.entry_key, parent_position + 1
            skipped += 1
            continue
        written = 0
        while skipped + written < len(messages) and isinstance(messages[skipped + written], ModelRequest):
            written += 1
        if not written:
            break
        stored = await requests_at(session, chain, parent_position + 1)
        continued = continues(stored, messages[skipped : skipped + written])
        if continued is None:
            break
        parent_key, parent_position = stored.entries[-1].entry_key, stored.entries[-1].position
        if continued.rest is not None:
            # After requests that end at the head: nothing follows there.
            return _Attach(parent_key, parent_position, skipped, first=continued.rest, replaced=written)
        skipped += written
    following = by_position.get(parent_position + 1)
    return _Attach(parent_key, parent_position, skipped, displaced=None if following is None else following.entry_key)


async def _resent(session: Session, entry_key: int, resent: str | None, run_id: str | None) -> bool:
    """Whether the stored entry is a message of an earlier run that a chat UI sent back as one with `resent`."""
    if resent is None:
        return False
    found = await session.one(
        f'SELECT e.message, {run_id_of("e.run_key")} FROM entries e WHERE e.entry_key = $1',  # noqa: S608
        entry_key,
    )
    if found is None or (run_id is not None and found[1] == run_id):
        return False
    return resent_hash(load_message(found[0])) == resent


def _new_columns(request: AppendRequest) -> RecordColumns:
    updated_at = now()
    return RecordColumns(
        conversation_id=request.conversation_id,
        scope=request.scope,
        head_id=None,
        branches=[],
        usage=dump_usage(request.usage if request.usage is not None else RunUsage()),
        deferred_tool_requests=None,
        forked_from=None,
        forked_at=None,
        revision=appended_revision(None, 0, request.run_id),
        updated_at=updated_at.isoformat(),
        updated_order=timestamp_order(updated_at),
        format_version=1,
    )


async def _move_head(
    session: Session,
    row: ConversationRow,
    new_head: int | None,
    *,
    branched: bool,
    usage: RunUsage | None,
    run_id: str | None,
    tail: Tail,
) -> None:
    """Move the head (keeping the old one in `branches` when the new entries branched), add usage, new
    revision (one that says which run appended since when: `_lineage`): the conversation's row's new
    values go to `tail`, which the write sends at its end (nothing it does before reads them)."""
    if branched and row.head_key is not None:
        await entries.write_branches(
            session, row.conv_key, [key for key in row.branch_keys if key != row.head_key] + [row.head_key]
        )
    total = row.usage
    if usage is not None:
        counted = load_usage(total)
        counted.incr(usage)
        total = dump_usage(counted)
    updated_at = now()
    tail.assign.update(
        head_key=new_head,
        usage=total,
        revision=appended_revision(row.revision, row.head_position + 1, run_id),
        updated_at=updated_at.isoformat(),
        updated_order=timestamp_order(updated_at),
    )
