"""A conversation's whole index membership, read from the log, given or taken away, on any backend.
More in docs/design/store.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from ..postings._segments import remove_postings
from ..sql._bulk import delete_rows, run_batch
from ..sql._session import Session
from ._documents import add_members
from ._superseded import follow_supersessions
from ._terms import Member, decode_term_ids
from ._vectors import forget_vectors

__all__ = ('chain_members', 'conversation_tips', 'index_conversation', 'release_members')


async def release_members(session: Session, conv_key: int) -> None:
    """Drop the conversation's membership, and the documents (with postings) no other conversation holds."""
    dialect = session.dialect
    held = [
        int(row[0])
        for row in await session.rows(
            'DELETE FROM conversation_documents WHERE conv_key = $1 RETURNING doc_id', conv_key
        )
    ]
    await session.run('UPDATE conversations SET document_count = 0, total_length = 0 WHERE conv_key = $1', conv_key)
    if not held:
        return
    # A document goes with its last membership. Counted here, where the caller keeps the tenant's
    # writers out, rather than kept in a counter every write of the document would update.
    released = await session.rows(
        'SELECT d.doc_id, d.tenant_id, d.length, d.term_ids FROM documents d '  # noqa: S608
        f'WHERE d.doc_id {dialect.in_array(1, "bigint")} '
        'AND NOT EXISTS (SELECT 1 FROM conversation_documents m WHERE m.doc_id = d.doc_id)',
        dialect.array(held),
    )
    orphans = [(int(row[0]), int(row[1]), int(row[2]), bytes(row[3])) for row in released]
    if not orphans:
        return
    doomed = [
        (tenant_id, term_id, doc_id)
        for doc_id, tenant_id, _, term_ids in orphans
        for term_id in decode_term_ids(term_ids)
    ]
    await remove_postings(session, doomed)  # Merges the tenants' segments first: the counters are whole.
    emptied = sorted(Counter((tenant_id, term_id) for tenant_id, term_id, _ in doomed).items())
    keys = (('tenant_id', 'bigint'), ('term_id', 'bigint'))
    await run_batch(
        session,
        f'UPDATE term_documents AS s SET document_count = s.document_count - d.count '  # noqa: S608
        f'FROM {dialect.batch((*keys, ("count", "bigint")))} '
        'WHERE s.tenant_id = d.tenant_id AND s.term_id = d.term_id',
        [(tenant_id, term_id, count) for (tenant_id, term_id), count in emptied],
    )
    await delete_rows(session, 'term_documents', keys, [key for key, _ in emptied], where='document_count <= 0')
    await forget_vectors(session, [doc_id for doc_id, _, _, _ in orphans])
    await session.run(
        f'DELETE FROM documents WHERE doc_id {dialect.in_array(1, "bigint")}',  # noqa: S608
        dialect.array(doc_id for doc_id, _, _, _ in orphans),
    )
    per_tenant: dict[int, tuple[int, int]] = {}
    for _, tenant_id, length, _ in orphans:
        count, total = per_tenant.get(tenant_id, (0, 0))
        per_tenant[tenant_id] = (count + 1, total + length)
    await run_batch(
        session,
        'UPDATE tenants AS t SET document_count = t.document_count - d.count, total_length = t.total_length - d.total '  # noqa: S608
        f'FROM {dialect.batch((("tenant_id", "bigint"), ("count", "bigint"), ("total", "bigint")))} '
        'WHERE t.tenant_id = d.tenant_id',
        [(tenant_id, count, total) for tenant_id, (count, total) in per_tenant.items()],
    )


async def conversation_tips(session: Session, conv_key: int) -> list[int]:
    """The entry keys a conversation reaches its history from: its head and the tips of its branches."""
    rows = await session.rows(
        'SELECT head_key FROM conversations WHERE conv_key = $1 AND head_key IS NOT NULL '
        'UNION SELECT entry_key FROM conversation_branches WHERE conv_key = $1',
        conv_key,
    )
    return [int(row[0]) for row in rows]


async def chain_members(session: Session, tips: Sequence[int]) -> list[Member]:
    """Every entry reachable from `tips` (through parent links), in entry-key order."""
    if not tips:
        return []
    rows = await session.rows(
        f"""
        WITH RECURSIVE reach(k) AS (
            SELECT value FROM {session.dialect.each(1, 'bigint')}
            UNION
            SELECT e.parent_key FROM reach JOIN entries e ON e.entry_key = reach.k WHERE e.parent_key IS NOT NULL
        )
        SELECT e.entry_key, e.position, e.run_key, e.content_hash, e.unindexed
        FROM reach JOIN entries e ON e.entry_key = reach.k
        ORDER BY e.entry_key
        """,  # noqa: S608
        session.dialect.array(tips),
    )
    return [
        Member(entry_key=row[0], position=row[1], run_key=row[2], content_hash=bytes(row[3]), unindexed=bool(row[4]))
        for row in rows
    ]


async def index_conversation(
    session: Session, conv_key: int, tenant_id: int, known: Mapping[int, Member] | None = None
) -> None:
    """Index everything the conversation reaches, in entry-key order: for a conversation created over stored
    entries. `known` are members this transaction prepared (their terms are not read back from the log)."""
    tips = await conversation_tips(session, conv_key)
    members = await chain_members(session, tips)
    if known:
        members = [known.get(member.entry_key, member) for member in members]
    await add_members(session, conv_key, tenant_id, members)
    if len(tips) > 1:
        await follow_supersessions(session, conv_key, tenant_id)
