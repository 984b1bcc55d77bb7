"""`DeltaWriter.append`: one step boundary's messages in one `BEGIN IMMEDIATE` transaction.

The persistence capability calls this at every step boundary, possibly more than once for the same
boundary (activity retries) and with messages Temporal re-instantiated, so everything is matched by
content hash and keyed by the writer's idempotency key:

1. A key already applied to this conversation returns the result recorded the first time.
2. The attach point is the entry at position `base_length - 1` on the current head's chain; its
   hash must be `base_hash`, else `HistoryMismatch` (the writer then resends with `base_length=0`,
   which attaches before the first entry).
3. Messages equal by hash to the entries that follow the attach point on the head's chain are
   already stored and skipped, so a retried delta stores nothing. The first message that differs
   and everything after it are new entries; if they attach behind the head, the conversation
   branches and the old head goes to `branches`. Messages that only repeat the head's chain (a
   shorter resend) leave the head where it is: the store never rewinds a conversation on a resend.

Before the idempotency key, a request's `Fence` is checked: the highest attempt seen for its key is
a row of `applied_writes` (key `FENCE_PREFIX + fence key`, attempt in `length`), read and raised in
this same transaction, so a late write from an earlier attempt can never land after a later one's.
"""

from __future__ import annotations

from pydantic_ai._utils import now_utc
from pydantic_ai._uuid import uuid7
from pydantic_ai.usage import RunUsage

from temporal_recall.errors import HistoryMismatch, UnknownConversation

from ._protocol import AppendRequest, AppendResult, Fence, fence_row_key
from ._serialization import (
    PreparedMessage,
    RecordColumns,
    dump_usage,
    hash_bytes,
    load_usage,
    prepare_message,
    timestamp_order,
)
from ._sqlite_db import Database
from ._sqlite_index import Member, add_members, intern_run, tenant_of
from ._sqlite_log import ConversationRow, conversation_row, head_chain, insert_conversation, insert_entry, max_entry_key
from ._sqlite_log import write_branches as _write_branches

__all__ = ('append',)


def _base_hash(request: AppendRequest) -> bytes | None:
    if request.base_length < 0:
        raise HistoryMismatch(f'base_length must not be negative (got {request.base_length}).')
    if request.base_length == 0:
        return None
    if request.base_hash is None:
        raise HistoryMismatch('base_hash is required when base_length is positive; resend with base_length=0.')
    try:
        return hash_bytes(request.base_hash)
    except ValueError:
        raise HistoryMismatch(f'base_hash {request.base_hash!r} is not a hex content hash.') from None


async def _replayed(db: Database, row: ConversationRow, request: AppendRequest) -> AppendResult | None:
    found = await db.one(
        'SELECT h.entry_id, w.length FROM applied_writes w LEFT JOIN entries h ON h.entry_key = w.head_key '
        'WHERE w.conv_key = ? AND w.idempotency_key = ?',
        (row.conv_key, request.idempotency_key),
    )
    if found is None:
        return None
    return AppendResult(
        conversation_id=request.conversation_id, head_id=found[0], length=found[1], stored=0, replayed=True
    )


async def _fenced(db: Database, row: ConversationRow, request: AppendRequest, fence_key: str) -> AppendResult | None:
    """The refusal for a write from an attempt lower than one the conversation already saw, else `None`."""
    assert request.fence is not None
    highest = await db.value(
        'SELECT length FROM applied_writes WHERE conv_key = ? AND idempotency_key = ?', (row.conv_key, fence_key)
    )
    if highest is None or int(highest) <= request.fence.attempt:
        return None
    head_id = (
        None
        if row.head_key is None
        else await db.value('SELECT entry_id FROM entries WHERE entry_key = ?', (row.head_key,))
    )
    return AppendResult(
        conversation_id=request.conversation_id,
        head_id=head_id,
        length=row.head_position + 1,
        stored=0,
        fenced=True,
    )


async def _raise_fence(db: Database, conv_key: int, fence_key: str, fence: Fence) -> None:
    await db.run(
        'INSERT INTO applied_writes (conv_key, idempotency_key, head_key, length, stored) VALUES (?, ?, NULL, ?, 0) '
        'ON CONFLICT (conv_key, idempotency_key) DO UPDATE SET length = max(length, excluded.length)',
        (conv_key, fence_key, fence.attempt),
    )


async def _attach(
    db: Database, row: ConversationRow | None, request: AppendRequest, base_hash: bytes | None, hashes: list[bytes]
) -> tuple[int | None, int, int]:
    """`(parent_key, parent_position, skipped)`: where the new messages go and how many are already stored."""
    base = request.base_length
    head_position = row.head_position if row is not None else -1
    if base - 1 > head_position:
        raise HistoryMismatch(
            f'Conversation {request.conversation_id!r} holds {head_position + 1} messages, fewer than the '
            f'{base} the delta follows; resend with base_length=0.'
        )
    if row is None or row.head_key is None:
        return None, -1, 0
    chain = await head_chain(db, row.head_key, base - 1)
    by_position = {position: (key, content) for key, position, content in chain}
    parent_key: int | None = None
    if base > 0:
        parent_key, stored_hash = by_position[base - 1]
        if stored_hash != base_hash:
            raise HistoryMismatch(
                f'Message {base - 1} of conversation {request.conversation_id!r} is not the one the delta '
                'follows (its content hash differs); resend with base_length=0.'
            )
    parent_position = base - 1
    skipped = 0
    for content in hashes:
        following = by_position.get(parent_position + 1)
        if following is None or following[1] != content:
            break
        parent_key, parent_position = following[0], parent_position + 1
        skipped += 1
    return parent_key, parent_position, skipped


async def append(db: Database, request: AppendRequest) -> AppendResult:
    base_hash = _base_hash(request)
    fence_key = fence_row_key(request)
    prepared = [
        prepare_message(message, run_id=request.run_id, summary=request.summary) for message in request.messages
    ]
    usage_increment = request.usage

    async def apply(db: Database) -> AppendResult:
        row = await conversation_row(db, request.conversation_id)
        if row is not None:
            if row.scope != request.scope:  # exactly: None and '' are different scopes
                raise UnknownConversation(request.conversation_id)
            if fence_key is not None:
                fenced = await _fenced(db, row, request, fence_key)
                if fenced is not None:
                    return fenced
                assert request.fence is not None
                await _raise_fence(db, row.conv_key, fence_key, request.fence)
            replayed = await _replayed(db, row, request)
            if replayed is not None:
                return replayed
        elif not request.create:
            raise UnknownConversation(request.conversation_id)
        parent_key, parent_position, skipped = await _attach(
            db, row, request, base_hash, [item.content_hash for item in prepared]
        )
        attach_key = parent_key
        created_seq = await max_entry_key(db)
        members: list[Member] = []
        for item in prepared[skipped:]:
            run_key = await intern_run(db, item.run_id)
            parent_position += 1
            parent_key = await _insert(db, item, parent_key, parent_position, run_key)
            members.append(
                Member(
                    entry_key=parent_key,
                    position=parent_position,
                    run_key=run_key,
                    content_hash=item.content_hash,
                    prepared=item,
                )
            )
        old_head = row.head_key if row is not None else None
        new_head = parent_key if members else old_head
        length = (parent_position if members else (row.head_position if row is not None else -1)) + 1
        changed = row is None or bool(members) or usage_increment is not None
        if row is None:
            tenant_id = await tenant_of(db, request.scope)
            conv_key = await insert_conversation(
                db,
                _new_columns(request, usage_increment),
                tenant_id=tenant_id,
                head_key=new_head,
                created_seq=created_seq,
            )
        else:
            conv_key, tenant_id = row.conv_key, row.tenant_id
            if changed:
                branched = bool(members) and attach_key != row.head_key
                await _update(db, row, new_head=new_head, branched=branched, usage_increment=usage_increment)
        await add_members(db, conv_key, tenant_id, members)
        if row is None and fence_key is not None:
            assert request.fence is not None
            await _raise_fence(db, conv_key, fence_key, request.fence)
        await db.run(
            'INSERT INTO applied_writes (conv_key, idempotency_key, head_key, length, stored) VALUES (?, ?, ?, ?, ?)',
            (conv_key, request.idempotency_key, new_head, length, len(members)),
        )
        head_id = (
            None
            if new_head is None
            else await db.value('SELECT entry_id FROM entries WHERE entry_key = ?', (new_head,))
        )
        return AppendResult(
            conversation_id=request.conversation_id, head_id=head_id, length=length, stored=len(members)
        )

    # One thread hop for the whole transaction: a write is a few dozen tiny statements.
    return await db.write_on_connection_thread(apply)


async def _insert(
    db: Database, item: PreparedMessage, parent_key: int | None, position: int, run_key: int | None
) -> int:
    return await insert_entry(
        db,
        entry_id=str(uuid7()),
        parent_key=parent_key,
        position=position,
        kind='message',
        prepared=item,
        run_key=run_key,
    )


def _new_columns(request: AppendRequest, usage: RunUsage | None) -> RecordColumns:
    updated_at = now_utc()
    return RecordColumns(
        conversation_id=request.conversation_id,
        scope=request.scope,
        head_id=None,
        branches=[],
        usage=dump_usage(usage if usage is not None else RunUsage()),
        deferred_tool_requests=None,
        forked_from=None,
        forked_at=None,
        revision=str(uuid7()),
        updated_at=updated_at.isoformat(),
        updated_order=timestamp_order(updated_at),
        format_version=1,
    )


async def _update(
    db: Database, row: ConversationRow, *, new_head: int | None, branched: bool, usage_increment: RunUsage | None
) -> None:
    """Move the head (keeping the old one in `branches` when the new entries branched), add usage, new revision."""
    if branched and row.head_key is not None:
        branches = [key for key in row.branch_keys if key != row.head_key] + [row.head_key]
        await _write_branches(db, row.conv_key, branches)
    usage = row.usage
    if usage_increment is not None:
        total = load_usage(usage)
        total.incr(usage_increment)
        usage = dump_usage(total)
    updated_at = now_utc()
    await db.run(
        'UPDATE conversations SET head_key = ?, usage = ?, revision = ?, updated_at = ?, updated_order = ? '
        'WHERE conv_key = ?',
        (new_head, usage, str(uuid7()), updated_at.isoformat(), timestamp_order(updated_at), row.conv_key),
    )
