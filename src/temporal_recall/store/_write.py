"""`ConversationStore.write_record`, written once: a record, its new entries and their index rows.

The revision check happens inside the transaction, so a conflict leaves nothing behind. A record
created over entries that are already stored (a fork) gets those entries indexed into its membership;
documents are per scope, so a fork into another scope gets its own. Entry ids are immutable: an entry
whose id is already stored is not written again. A head, branch or parent that names an entry no
longer stored was released by a concurrent delete: the write raises `ConversationConflict`.

Lock order (which matters on PostgreSQL, where writers run at once): the conversation row, then the
tenant rows (the old and the new scope's when a record changes scope), then entries and the index.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_ai.conversation_store import ConversationConflict, ConversationEntry, ConversationRecord

from ._driver import WriteDriver
from ._serialization import PreparedMessage, RecordColumns

__all__ = ('apply',)


async def apply(
    driver: WriteDriver,
    record: ConversationRecord,
    new_entries: Sequence[ConversationEntry],
    prepared: Sequence[PreparedMessage],
    columns: RecordColumns,
    expected_revision: str | None,
) -> None:
    """The whole `write_record`, inside the driver's write transaction."""
    conflict = ConversationConflict(record.conversation_id)
    row = await driver.conversation(record.conversation_id, None)
    if (row.revision if row is not None else None) != expected_revision:
        raise conflict
    tenant_id = await driver.tenant_of(record.scope)
    await driver.lock_tenants([tenant_id] if row is None else [tenant_id, row.tenant_id])
    created_seq = await driver.max_entry_key()
    members = await driver.insert_entries(new_entries, prepared, conflict)
    tips = [*([] if record.head_id is None else [record.head_id]), *record.branches]
    known = await driver.entry_keys(tips)
    if any(tip not in known for tip in tips):
        raise conflict
    head_key = None if record.head_id is None else known[record.head_id][0]
    branch_keys = [known[tip][0] for tip in record.branches]
    by_key = {member.entry_key: member for member in members.values()}
    if row is None:
        conv_key = await driver.insert_conversation(
            columns, tenant_id=tenant_id, head_key=head_key, created_seq=created_seq
        )
        await driver.write_branches(conv_key, branch_keys)
        await driver.index_conversation(conv_key, tenant_id, by_key)
        return
    await driver.update_conversation(row.conv_key, columns, tenant_id=tenant_id, head_key=head_key)
    if branch_keys != row.branch_keys:
        await driver.write_branches(row.conv_key, branch_keys)
    if tenant_id != row.tenant_id:
        # The scope changed: its documents belong to the old tenant. Index it afresh, as if re-created now.
        await driver.restart_membership(row.conv_key, created_seq)
        await driver.index_conversation(row.conv_key, tenant_id, by_key)
        return
    reached = _reachable_new(new_entries, [record.head_id, *record.branches])
    await driver.add_members(row.conv_key, tenant_id, [members[id_] for id_ in members if id_ in reached])


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
