"""The PostgreSQL `WriteDriver`: the statements of an append or a `write_record`, in PostgreSQL's SQL.

The rules are the engine's (`_append`, `_write`). What this driver adds is how concurrent writers
are kept apart:

- The conversation row is locked (`SELECT … FOR UPDATE`) before the idempotency key, the attach
  point and the revision are read, so two workers appending to one conversation take turns and
  the second sees the first's messages, exactly as under SQLite's single writer.
- A conversation that does not exist yet has no row to lock. Two appends creating it at once both
  insert it; the unique constraint makes the second fail when the first commits, and that append
  is retried from the start, when it finds (and locks) the row the first created.
- The fence (the highest attempt seen per fence key) is read and raised under that row lock, so
  two attempts of one activity writing at once are ordered like any two writers.
- `write_record` locks the conversation row before its revision is checked (of two writers that
  loaded the same revision exactly one succeeds), then the tenant rows, before entries or the index
  are touched: the lock order every write follows (see `_postgres_index`).
- New entries go in with one `unnest` insert, their keys allocated in one call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from asyncpg import exceptions as pg
from pydantic_ai.conversation_store import ConversationConflict, ConversationEntry, ConversationRecord

from . import _append, _write
from . import _statements as statements
from ._postgres_db import Conn, Database
from ._postgres_index import (
    add_members,
    allocate_keys,
    index_conversation,
    intern_runs,
    lock_tenants,
    release_members,
    tenant_of,
)
from ._postgres_log import (
    EntryRow,
    entry_keys,
    head_chain,
    insert_conversation,
    insert_entries,
    lock_conversation,
    max_entry_key,
    update_conversation,
)
from ._postgres_log import write_branches as _write_branches
from ._postgres_schema import CONVERSATION_ID_UNIQUE
from ._protocol import AppendRequest, AppendResult
from ._rows import ConversationRow, Member
from ._serialization import PreparedMessage, RecordColumns

__all__ = ('append', 'lost_creation_race', 'write_record')


def lost_creation_race(error: BaseException) -> bool:
    """Whether `error` is a concurrent transaction having created the same conversation first."""
    constraint = getattr(error, 'constraint_name', None)
    return isinstance(error, pg.UniqueViolationError) and constraint == CONVERSATION_ID_UNIQUE


async def append(db: Database, request: AppendRequest) -> AppendResult:
    prepared = _append.prepare(request)
    return await db.write(lambda conn: _append.apply(_Driver(conn), prepared), retry=lost_creation_race)


async def write_record(
    conn: Conn,
    record: ConversationRecord,
    new_entries: Sequence[ConversationEntry],
    prepared: Sequence[PreparedMessage],
    columns: RecordColumns,
    expected_revision: str | None,
) -> None:
    """The body of `write_record`'s transaction (the store opens it, retrying a lost creation race)."""
    await _write.apply(_Driver(conn), record, new_entries, prepared, columns, expected_revision)


class _Driver:
    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    async def conversation(self, conversation_id: str, idempotency_key: str | None) -> ConversationRow | None:
        return await lock_conversation(self._conn, conversation_id, idempotency_key=idempotency_key)

    async def highest_attempt(self, conv_key: int, fence_key: str) -> int | None:
        found = await self._conn.fetchval(statements.HIGHEST_ATTEMPT, conv_key, fence_key)
        return None if found is None else int(found)

    async def raise_fence(self, conv_key: int, fence_key: str, attempt: int) -> None:
        await self._conn.execute(
            'INSERT INTO applied_writes (conv_key, idempotency_key, head_key, length, stored) '
            'VALUES ($1, $2, NULL, $3, 0) ON CONFLICT (conv_key, idempotency_key) '
            'DO UPDATE SET length = GREATEST(applied_writes.length, EXCLUDED.length)',
            conv_key,
            fence_key,
            attempt,
        )

    async def tenant_of(self, scope: str | None) -> int:
        return await tenant_of(self._conn, scope)

    async def lock_tenants(self, tenant_ids: Sequence[int]) -> None:
        await lock_tenants(self._conn, tenant_ids)

    async def head_chain(self, head_key: int, min_position: int) -> list[tuple[int, int, bytes]]:
        return await head_chain(self._conn, head_key, min_position)

    async def max_entry_key(self) -> int:
        return await max_entry_key(self._conn)

    async def insert_chain(
        self, items: Sequence[PreparedMessage], ids: Sequence[str], parent_key: int | None, parent_position: int
    ) -> list[Member]:
        runs = await intern_runs(self._conn, (item.run_id for item in items))
        keys = await allocate_keys(self._conn, 'entries', len(items))
        rows: list[EntryRow] = []
        members: list[Member] = []
        for index, (item, key, entry_id) in enumerate(zip(items, keys, ids, strict=True)):
            position = parent_position + 1 + index
            run_key = None if item.run_id is None else runs[item.run_id]
            rows.append(
                EntryRow(
                    entry_key=key,
                    entry_id=entry_id,
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
        await insert_entries(self._conn, rows)
        return members

    async def insert_conversation(
        self, columns: RecordColumns, *, tenant_id: int, head_key: int | None, created_seq: int
    ) -> int:
        return await insert_conversation(
            self._conn, columns, tenant_id=tenant_id, head_key=head_key, created_seq=created_seq
        )

    async def write_branches(self, conv_key: int, branch_keys: Sequence[int]) -> None:
        await _write_branches(self._conn, conv_key, branch_keys)

    async def move_head(
        self, conv_key: int, *, head_key: int | None, usage: str, revision: str, updated_at: str, updated_order: int
    ) -> None:
        await self._conn.execute(statements.MOVE_HEAD, conv_key, head_key, usage, revision, updated_at, updated_order)

    async def add_members(self, conv_key: int, tenant_id: int, members: Sequence[Member]) -> None:
        await add_members(self._conn, conv_key, tenant_id, members)

    async def record_applied(
        self, conv_key: int, idempotency_key: str, *, head_key: int | None, length: int, stored: int
    ) -> None:
        await self._conn.execute(statements.RECORD_APPLIED, conv_key, idempotency_key, head_key, length, stored)

    async def entry_keys(self, entry_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
        return await entry_keys(self._conn, entry_ids)

    async def insert_entries(
        self,
        entries: Sequence[ConversationEntry],
        prepared: Sequence[PreparedMessage],
        conflict: ConversationConflict,
    ) -> dict[str, Member]:
        """In one statement."""
        known = await entry_keys(
            self._conn, [*(entry.id for entry in entries), *(e.parent_id for e in entries if e.parent_id is not None)]
        )
        todo = [(entry, item) for entry, item in zip(entries, prepared, strict=True) if entry.id not in known]
        runs = await intern_runs(self._conn, (item.run_id for _, item in todo))
        keys = iter(await allocate_keys(self._conn, 'entries', len(todo)))
        rows: list[EntryRow] = []
        members: dict[str, Member] = {}
        for entry, item in todo:
            if entry.id in known:
                continue  # Entry ids are immutable: a stored one (or a repeat in this batch) is never rewritten.
            parent = None if entry.parent_id is None else known.get(entry.parent_id)
            if entry.parent_id is not None and parent is None:
                raise conflict  # Its parent was released by a concurrent delete.
            key, position = next(keys), 0 if parent is None else parent[1] + 1
            run_key = None if item.run_id is None else runs[item.run_id]
            known[entry.id] = (key, position)
            rows.append(
                EntryRow(
                    entry_key=key,
                    entry_id=entry.id,
                    parent_key=None if parent is None else parent[0],
                    position=position,
                    kind=entry.kind,
                    content_hash=item.content_hash,
                    run_key=run_key,
                    message_json=item.message_json,
                )
            )
            members[entry.id] = Member(
                entry_key=key, position=position, run_key=run_key, content_hash=item.content_hash, prepared=item
            )
        await insert_entries(self._conn, rows)
        return members

    async def update_conversation(
        self, conv_key: int, columns: RecordColumns, *, tenant_id: int, head_key: int | None
    ) -> None:
        await update_conversation(self._conn, conv_key, columns, tenant_id=tenant_id, head_key=head_key)

    async def restart_membership(self, conv_key: int, created_seq: int) -> None:
        await release_members(self._conn, conv_key)
        await self._conn.execute('UPDATE conversations SET created_seq = $1 WHERE conv_key = $2', created_seq, conv_key)

    async def index_conversation(self, conv_key: int, tenant_id: int, known: Mapping[int, Member]) -> None:
        await index_conversation(self._conn, conv_key, tenant_id, known)
