"""The SQLite `WriteDriver`: the statements of an append or a `write_record`, in SQLite's SQL.

The rules are the engine's (`_append`, `_write`). SQLite has one writer at a time (`BEGIN IMMEDIATE`),
so nothing is locked beyond the transaction. An append runs its whole transaction on the connection
thread: one thread hop per append, however many statements it takes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic_ai.conversation_store import ConversationConflict, ConversationEntry, ConversationRecord

from . import _append, _write
from . import _statements as statements
from ._protocol import AppendRequest, AppendResult
from ._rows import ConversationRow, Member
from ._serialization import PreparedMessage, RecordColumns
from ._sqlite_db import Database
from ._sqlite_index import add_members, index_conversation, intern_run, release_members, tenant_of
from ._sqlite_log import (
    conversation_row,
    entry_key_of,
    head_chain,
    insert_conversation,
    insert_entry,
    max_entry_key,
    update_conversation,
    write_branches,
)
from ._statements import for_sqlite

__all__ = ('append', 'write_record')

_HIGHEST_ATTEMPT = for_sqlite(statements.HIGHEST_ATTEMPT)
_MOVE_HEAD = for_sqlite(statements.MOVE_HEAD)
_RECORD_APPLIED = for_sqlite(statements.RECORD_APPLIED)


async def append(db: Database, request: AppendRequest) -> AppendResult:
    prepared = _append.prepare(request)
    # One thread hop for the whole transaction: a write is a few dozen tiny statements.
    return await db.write_on_connection_thread(lambda db: _append.apply(_Driver(db), prepared))


async def write_record(
    db: Database,
    record: ConversationRecord,
    new_entries: Sequence[ConversationEntry],
    prepared: Sequence[PreparedMessage],
    columns: RecordColumns,
    expected_revision: str | None,
) -> None:
    async with db.write():
        await _write.apply(_Driver(db), record, new_entries, prepared, columns, expected_revision)


class _Driver:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def conversation(self, conversation_id: str, idempotency_key: str | None) -> ConversationRow | None:
        return await conversation_row(self._db, conversation_id, idempotency_key=idempotency_key)

    async def highest_attempt(self, conv_key: int, fence_key: str) -> int | None:
        found = await self._db.value(_HIGHEST_ATTEMPT, (conv_key, fence_key))
        return None if found is None else int(found)

    async def raise_fence(self, conv_key: int, fence_key: str, attempt: int) -> None:
        await self._db.run(
            'INSERT INTO applied_writes (conv_key, idempotency_key, head_key, length, stored) '
            'VALUES (?, ?, NULL, ?, 0) ON CONFLICT (conv_key, idempotency_key) '
            'DO UPDATE SET length = max(length, excluded.length)',
            (conv_key, fence_key, attempt),
        )

    async def tenant_of(self, scope: str | None) -> int:
        return await tenant_of(self._db, scope)

    async def lock_tenants(self, tenant_ids: Sequence[int]) -> None:
        """Nothing to lock: `BEGIN IMMEDIATE` already made this the only writer."""

    async def head_chain(self, head_key: int, min_position: int) -> list[tuple[int, int, bytes]]:
        return await head_chain(self._db, head_key, min_position)

    async def max_entry_key(self) -> int:
        return await max_entry_key(self._db)

    async def insert_chain(
        self, items: Sequence[PreparedMessage], ids: Sequence[str], parent_key: int | None, parent_position: int
    ) -> list[Member]:
        members: list[Member] = []
        for item, entry_id in zip(items, ids, strict=True):
            run_key = await intern_run(self._db, item.run_id)
            parent_position += 1
            parent_key = await insert_entry(
                self._db,
                entry_id=entry_id,
                parent_key=parent_key,
                position=parent_position,
                kind='message',
                prepared=item,
                run_key=run_key,
            )
            members.append(
                Member(
                    entry_key=parent_key,
                    position=parent_position,
                    run_key=run_key,
                    content_hash=item.content_hash,
                    prepared=item,
                )
            )
        return members

    async def insert_conversation(
        self, columns: RecordColumns, *, tenant_id: int, head_key: int | None, created_seq: int
    ) -> int:
        return await insert_conversation(
            self._db, columns, tenant_id=tenant_id, head_key=head_key, created_seq=created_seq
        )

    async def write_branches(self, conv_key: int, branch_keys: Sequence[int]) -> None:
        await write_branches(self._db, conv_key, branch_keys)

    async def move_head(
        self, conv_key: int, *, head_key: int | None, usage: str, revision: str, updated_at: str, updated_order: int
    ) -> None:
        await self._db.run(_MOVE_HEAD, (conv_key, head_key, usage, revision, updated_at, updated_order))

    async def add_members(self, conv_key: int, tenant_id: int, members: Sequence[Member]) -> None:
        await add_members(self._db, conv_key, tenant_id, members)

    async def record_applied(
        self, conv_key: int, idempotency_key: str, *, head_key: int | None, length: int, stored: int
    ) -> None:
        await self._db.run(_RECORD_APPLIED, (conv_key, idempotency_key, head_key, length, stored))

    async def entry_keys(self, entry_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
        found: dict[str, tuple[int, int]] = {}
        for entry_id in entry_ids:
            key = await entry_key_of(self._db, entry_id)
            if key is not None:
                found[entry_id] = key
        return found

    async def insert_entries(
        self,
        entries: Sequence[ConversationEntry],
        prepared: Sequence[PreparedMessage],
        conflict: ConversationConflict,
    ) -> dict[str, Member]:
        members: dict[str, Member] = {}
        for entry, item in zip(entries, prepared, strict=True):
            if await entry_key_of(self._db, entry.id) is not None:
                continue
            parent = None if entry.parent_id is None else await entry_key_of(self._db, entry.parent_id)
            if entry.parent_id is not None and parent is None:
                raise conflict
            position = 0 if parent is None else parent[1] + 1
            run_key = await intern_run(self._db, item.run_id)
            key = await insert_entry(
                self._db,
                entry_id=entry.id,
                parent_key=None if parent is None else parent[0],
                position=position,
                kind=entry.kind,
                prepared=item,
                run_key=run_key,
            )
            members[entry.id] = Member(
                entry_key=key, position=position, run_key=run_key, content_hash=item.content_hash, prepared=item
            )
        return members

    async def update_conversation(
        self, conv_key: int, columns: RecordColumns, *, tenant_id: int, head_key: int | None
    ) -> None:
        await update_conversation(self._db, conv_key, columns, tenant_id=tenant_id, head_key=head_key)

    async def restart_membership(self, conv_key: int, created_seq: int) -> None:
        await release_members(self._db, conv_key)
        await self._db.run('UPDATE conversations SET created_seq = ? WHERE conv_key = ?', (created_seq, conv_key))

    async def index_conversation(self, conv_key: int, tenant_id: int, known: Mapping[int, Member]) -> None:
        await index_conversation(self._db, conv_key, tenant_id, known)
