"""`ConversationStore.write_record`, written once: a record, its new entries and their index rows.
More in docs/design/store.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydantic_ai.conversation_store import ConversationConflict, ConversationEntry, ConversationRecord

from ..index._documents import add_members, lock_contents
from ..index._membership import index_conversation, release_members
from ..index._superseded import follow_supersessions
from ..index._terms import PreparedMessage
from ..sql._session import Backend, Session
from . import _entries as entries
from ._columns import RecordColumns
from ._tenants import lock_tenants, tenant_of

__all__ = ('write_record',)


async def write_record(
    backend: Backend,
    record: ConversationRecord,
    new_entries: Sequence[ConversationEntry],
    prepared: Sequence[PreparedMessage],
    columns: RecordColumns,
    expected_revision: str | None,
    merge_due: Callable[[int], None],
) -> None:
    """`ConversationStore.write_record` (checked and serialised by the caller) in one write transaction;
    a tenant whose segments it left due a merge goes to `merge_due` (`postings._merger`)."""
    conflict = ConversationConflict(record.conversation_id)
    write = _RecordWrite(record, new_entries, prepared, columns, expected_revision, conflict)
    merging: list[int] = []  # The tenant, when the write left its segments due a merge.

    async def body(session: Session) -> None:
        try:
            await _apply(session, write, merging)
        except Exception as error:
            if entries.integrity_violation(error):
                raise conflict from error
            raise

    await backend.run_write(body)
    for tenant_id in merging:
        merge_due(tenant_id)


@dataclass(frozen=True)
class _RecordWrite:
    """What `write_record` was asked to write, and the conflict it raises."""

    record: ConversationRecord
    new_entries: Sequence[ConversationEntry]
    prepared: Sequence[PreparedMessage]
    columns: RecordColumns
    expected_revision: str | None
    conflict: ConversationConflict


async def _apply(session: Session, write: _RecordWrite, merging: list[int]) -> None:
    """The whole write, inside the transaction; the tenant joins `merging` (emptied first: the body may
    run again) when its segments are due a merge after the commit."""
    record, new_entries, conflict = write.record, write.new_entries, write.conflict
    merging.clear()
    row = await entries.conversation_row(session, record.conversation_id)
    if (row.revision if row is not None else None) != write.expected_revision:
        raise conflict
    tenant_id = await tenant_of(session, record.scope)
    # A record created (perhaps over stored entries: a fork) or moved to another scope is indexed
    # afresh, its membership released first: that waits for the tenants' other writers. A record
    # written on adds new entries only, side by side with them (docs/design/store.md, "Concurrency").
    alone = row is None or row.tenant_id != tenant_id
    await lock_tenants(session, [tenant_id] if row is None else [tenant_id, row.tenant_id], exclusive=alone)
    if not alone:  # Before the entries take their keys, as an append does (`_append.apply`).
        await lock_contents(session, tenant_id, (item.content_hash for item in write.prepared if item.terms))
    created_seq = await entries.max_entry_key(session)
    members = await entries.insert_entries(session, new_entries, write.prepared, conflict)
    tips = [*([] if record.head_id is None else [record.head_id]), *record.branches]
    known = await entries.entry_keys(session, tips)
    if any(tip not in known for tip in tips):
        raise conflict
    head_key = None if record.head_id is None else known[record.head_id][0]
    branch_keys = [known[tip][0] for tip in record.branches]
    by_key = {member.entry_key: member for member in members.values()}
    if row is None:
        conv_key = await entries.insert_conversation(
            session, write.columns, tenant_id=tenant_id, head_key=head_key, created_seq=created_seq
        )
        await entries.write_branches(session, conv_key, branch_keys)
        await index_conversation(session, conv_key, tenant_id, by_key)
        return
    await entries.update_conversation(session, row.conv_key, write.columns, tenant_id=tenant_id, head_key=head_key)
    if branch_keys != row.branch_keys:
        await entries.write_branches(session, row.conv_key, branch_keys)
    if tenant_id != row.tenant_id:
        # The scope changed: its documents belong to the old tenant. Index it afresh, as if re-created now.
        await release_members(session, row.conv_key)
        await session.run('UPDATE conversations SET created_seq = $1 WHERE conv_key = $2', created_seq, row.conv_key)
        await index_conversation(session, row.conv_key, tenant_id, by_key)
        return
    reached = _reachable_new(new_entries, [record.head_id, *record.branches])
    joining = [members[id_] for id_ in members if id_ in reached]
    if await add_members(
        session, row.conv_key, tenant_id, joining, merge=not session.dialect.supports_concurrent_writes
    ):
        merging.append(tenant_id)
    if head_key != row.head_key or branch_keys != row.branch_keys:
        await follow_supersessions(session, row.conv_key, tenant_id)


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
