"""`DeltaWriter.append` on PostgreSQL: one step boundary's messages in one transaction.

The rules are `_sqlite_append`'s (idempotency key, attach point, matching by content hash, branching,
never rewinding); read its module doc. What changes is how concurrent writers are kept apart:

- The conversation row is locked (`SELECT … FOR UPDATE`) before the idempotency key, the attach
  point and the revision are read, so two workers appending to one conversation take turns and
  the second sees the first's messages, exactly as under SQLite's single writer.
- A conversation that does not exist yet has no row to lock. Two appends creating it at once both
  insert it; the unique constraint makes the second fail when the first commits, and that append
  is retried from the start, when it finds (and locks) the row the first created.
- The fence (the highest attempt seen per fence key) is read and raised under that row lock, so
  two attempts of one activity writing at once are ordered like any two writers.
"""

from __future__ import annotations

from collections.abc import Sequence

from asyncpg import exceptions as pg
from pydantic_ai._utils import now_utc
from pydantic_ai._uuid import uuid7
from pydantic_ai.usage import RunUsage

from temporal_recall.errors import HistoryMismatch, UnknownConversation

from ._postgres_db import Conn, Database
from ._postgres_index import Member, add_members, allocate_keys, intern_runs, lock_tenants, tenant_of
from ._postgres_log import (
    ConversationRow,
    EntryRow,
    head_chain,
    insert_conversation,
    insert_entries,
    lock_conversation,
    max_entry_key,
    write_branches,
)
from ._postgres_schema import CONVERSATION_ID_UNIQUE
from ._protocol import AppendRequest, AppendResult, Fence, fence_row_key
from ._serialization import PreparedMessage, RecordColumns, dump_usage, hash_bytes, load_usage, prepare_message
from ._serialization import timestamp_order as _order

__all__ = ('append', 'lost_creation_race')


def lost_creation_race(error: BaseException) -> bool:
    """Whether `error` is a concurrent transaction having created the same conversation first."""
    constraint = getattr(error, 'constraint_name', None)
    return isinstance(error, pg.UniqueViolationError) and constraint == CONVERSATION_ID_UNIQUE


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


async def _fenced(conn: Conn, row: ConversationRow, request: AppendRequest, fence_key: str) -> AppendResult | None:
    """The refusal for a write from an attempt lower than one the conversation already saw, else `None`."""
    assert request.fence is not None
    highest = await conn.fetchval(
        'SELECT length FROM applied_writes WHERE conv_key = $1 AND idempotency_key = $2', row.conv_key, fence_key
    )
    if highest is None or int(highest) <= request.fence.attempt:
        return None
    return AppendResult(
        conversation_id=request.conversation_id,
        head_id=row.head_id,
        length=row.head_position + 1,
        stored=0,
        fenced=True,
    )


async def _raise_fence(conn: Conn, conv_key: int, fence_key: str, fence: Fence) -> None:
    await conn.execute(
        'INSERT INTO applied_writes (conv_key, idempotency_key, head_key, length, stored) VALUES ($1, $2, NULL, $3, 0) '
        'ON CONFLICT (conv_key, idempotency_key) '
        'DO UPDATE SET length = GREATEST(applied_writes.length, EXCLUDED.length)',
        conv_key,
        fence_key,
        fence.attempt,
    )


async def _attach(
    conn: Conn, row: ConversationRow | None, request: AppendRequest, base_hash: bytes | None, hashes: list[bytes]
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
    chain = await head_chain(conn, row.head_key, base - 1)
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


async def _store_new(
    conn: Conn, items: Sequence[PreparedMessage], parent_key: int | None, parent_position: int
) -> tuple[list[Member], list[str]]:
    """Insert `items` as a chain after `parent_key`: the members they add and their entry ids."""
    runs = await intern_runs(conn, (item.run_id for item in items))
    keys = await allocate_keys(conn, 'entries', len(items))
    ids = [str(uuid7()) for _ in items]
    rows: list[EntryRow] = []
    members: list[Member] = []
    for index, (item, key) in enumerate(zip(items, keys, strict=True)):
        position = parent_position + 1 + index
        run_key = None if item.run_id is None else runs[item.run_id]
        rows.append(
            EntryRow(
                entry_key=key,
                entry_id=ids[index],
                parent_key=parent_key,
                position=position,
                kind='message',
                content_hash=item.content_hash,
                run_key=run_key,
                message_json=item.message_json,
                unindexed=item.unindexed,
            )
        )
        members.append(
            Member(entry_key=key, position=position, run_key=run_key, content_hash=item.content_hash, prepared=item)
        )
        parent_key = key
    await insert_entries(conn, rows)
    return members, ids


async def _apply(
    conn: Conn,
    request: AppendRequest,
    base_hash: bytes | None,
    prepared: Sequence[PreparedMessage],
    fence_key: str | None,
) -> AppendResult:
    row = await lock_conversation(conn, request.conversation_id, idempotency_key=request.idempotency_key)
    if row is not None:
        if row.scope != request.scope:  # exactly: None and '' are different scopes
            raise UnknownConversation(request.conversation_id)
        if fence_key is not None:
            fenced = await _fenced(conn, row, request, fence_key)
            if fenced is not None:
                return fenced
            assert request.fence is not None
            await _raise_fence(conn, row.conv_key, fence_key, request.fence)
        if row.applied is not None:
            head_id, length = row.applied
            return AppendResult(
                conversation_id=request.conversation_id, head_id=head_id, length=length, stored=0, replayed=True
            )
        tenant_id = row.tenant_id
    elif not request.create:
        raise UnknownConversation(request.conversation_id)
    else:
        tenant_id = await tenant_of(conn, request.scope)
    await lock_tenants(conn, [tenant_id])
    parent_key, parent_position, skipped = await _attach(
        conn, row, request, base_hash, [item.content_hash for item in prepared]
    )
    attach_key = parent_key
    created_seq = await max_entry_key(conn) if row is None else 0
    members, ids = await _store_new(conn, prepared[skipped:], parent_key, parent_position)
    old_head = row.head_key if row is not None else None
    new_head = members[-1].entry_key if members else old_head
    head_id = ids[-1] if ids else (row.head_id if row is not None else None)
    length = (members[-1].position if members else (row.head_position if row is not None else -1)) + 1
    usage_increment = request.usage
    if row is None:
        conv_key = await insert_conversation(
            conn,
            _new_columns(request, usage_increment),
            tenant_id=tenant_id,
            head_key=new_head,
            created_seq=created_seq,
        )
    else:
        conv_key = row.conv_key
        if members or usage_increment is not None:
            branched = bool(members) and attach_key != row.head_key
            await _update(conn, row, new_head=new_head, branched=branched, usage_increment=usage_increment)
    await add_members(conn, conv_key, tenant_id, members)
    if row is None and fence_key is not None:
        assert request.fence is not None
        await _raise_fence(conn, conv_key, fence_key, request.fence)
    await conn.execute(
        'INSERT INTO applied_writes (conv_key, idempotency_key, head_key, length, stored) VALUES ($1, $2, $3, $4, $5)',
        conv_key,
        request.idempotency_key,
        new_head,
        length,
        len(members),
    )
    return AppendResult(conversation_id=request.conversation_id, head_id=head_id, length=length, stored=len(members))


async def append(db: Database, request: AppendRequest) -> AppendResult:
    base_hash = _base_hash(request)
    fence_key = fence_row_key(request)
    prepared = [
        prepare_message(message, run_id=request.run_id, summary=request.summary) for message in request.messages
    ]
    return await db.write(lambda conn: _apply(conn, request, base_hash, prepared, fence_key), retry=lost_creation_race)


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
        updated_order=_order(updated_at),
        format_version=1,
    )


async def _update(
    conn: Conn, row: ConversationRow, *, new_head: int | None, branched: bool, usage_increment: RunUsage | None
) -> None:
    """Move the head (keeping the old one in `branches` when the new entries branched), add usage, new revision."""
    if branched and row.head_key is not None:
        branches = [key for key in row.branch_keys if key != row.head_key] + [row.head_key]
        await write_branches(conn, row.conv_key, branches)
    usage = row.usage
    if usage_increment is not None:
        total = load_usage(usage)
        total.incr(usage_increment)
        usage = dump_usage(total)
    updated_at = now_utc()
    await conn.execute(
        'UPDATE conversations SET head_key = $2, usage = $3, revision = $4, updated_at = $5, updated_order = $6 '
        'WHERE conv_key = $1',
        row.conv_key,
        new_head,
        usage,
        str(uuid7()),
        updated_at.isoformat(),
        _order(updated_at),
    )
