"""`ConversationStore.write_record` on PostgreSQL: the body of its one transaction.

The rules are `SqliteConversationStore.write_record`'s. The conversation's row is locked before its
revision is checked (of two writers that loaded the same revision exactly one succeeds), then the
tenant rows (the old and the new scope's when a record changes scope), before entries or the index
are touched — the lock order every write follows (see `_postgres_index`). New entries go in with
one statement; entries already stored are never rewritten.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_ai.conversation_store import ConversationConflict, ConversationEntry, ConversationRecord

from ._postgres_db import Conn
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
    insert_conversation,
    insert_entries,
    lock_conversation,
    max_entry_key,
    update_conversation,
    write_branches,
)
from ._rows import Member
from ._serialization import PreparedMessage, RecordColumns

__all__ = ('write_record',)


def _reachable_new(new_entries: Sequence[ConversationEntry], tips: Sequence[str | None]) -> set[str]:
    """The ids of `new_entries` that `tips` reach through parent links: the ones to index."""
    by_id = {entry.id: entry for entry in new_entries}
    reached: set[str] = set()
    for tip in tips:
        entry_id = tip
        while entry_id is not None and entry_id in by_id and entry_id not in reached:
            reached.add(entry_id)
            entry_id = by_id[entry_id].parent_id
    return reached


async def _insert_entries(
    conn: Conn,
    new_entries: Sequence[ConversationEntry],
    prepared: Sequence[PreparedMessage],
    conflict: ConversationConflict,
) -> dict[str, Member]:
    """Insert the entries not stored yet, in order, in one statement; the members they would add, by entry id."""
    known = await entry_keys(
        conn, [*(entry.id for entry in new_entries), *(e.parent_id for e in new_entries if e.parent_id is not None)]
    )
    todo = [(entry, item) for entry, item in zip(new_entries, prepared, strict=True) if entry.id not in known]
    runs = await intern_runs(conn, (item.run_id for _, item in todo))
    keys = iter(await allocate_keys(conn, 'entries', len(todo)))
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
    await insert_entries(conn, rows)
    return members


async def write_record(
    conn: Conn,
    record: ConversationRecord,
    new_entries: Sequence[ConversationEntry],
    prepared: Sequence[PreparedMessage],
    columns: RecordColumns,
    expected_revision: str | None,
    conflict: ConversationConflict,
) -> None:
    row = await lock_conversation(conn, record.conversation_id)
    if (row.revision if row is not None else None) != expected_revision:
        raise conflict
    tenant_id = await tenant_of(conn, record.scope)
    await lock_tenants(conn, [tenant_id] if row is None else [tenant_id, row.tenant_id])
    created_seq = await max_entry_key(conn)
    members = await _insert_entries(conn, new_entries, prepared, conflict)
    tips = [*([] if record.head_id is None else [record.head_id]), *record.branches]
    known = await entry_keys(conn, tips)
    if any(tip not in known for tip in tips):
        raise conflict
    head_key = None if record.head_id is None else known[record.head_id][0]
    branch_keys = [known[tip][0] for tip in record.branches]
    by_key = {member.entry_key: member for member in members.values()}
    if row is None:
        conv_key = await insert_conversation(
            conn, columns, tenant_id=tenant_id, head_key=head_key, created_seq=created_seq
        )
        await write_branches(conn, conv_key, branch_keys)
        await index_conversation(conn, conv_key, tenant_id, by_key)
        return
    await update_conversation(conn, row.conv_key, columns, tenant_id=tenant_id, head_key=head_key)
    if branch_keys != row.branch_keys:
        await write_branches(conn, row.conv_key, branch_keys)
    if tenant_id != row.tenant_id:
        # The scope changed: its documents belong to the old tenant. Index it afresh, as if re-created now.
        await release_members(conn, row.conv_key)
        await conn.execute('UPDATE conversations SET created_seq = $1 WHERE conv_key = $2', created_seq, row.conv_key)
        await index_conversation(conn, row.conv_key, tenant_id, by_key)
        return
    reached = _reachable_new(new_entries, [record.head_id, *record.branches])
    await add_members(conn, row.conv_key, tenant_id, [members[id_] for id_ in members if id_ in reached])
