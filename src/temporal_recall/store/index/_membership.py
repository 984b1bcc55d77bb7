"""A conversation's whole index membership, read from the log, given, taken away or rebuilt, on any backend.
More in docs/design/store.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from temporal_recall.text._analyzer import ANALYZER

from ..postings._segments import remove_postings
from ..sql._bulk import delete_rows, run_batch
from ..sql._session import Row, Session
from ._bulk import Event, index_events
from ._documents import add_members
from ._superseded import SUPERSEDING, follow_supersessions, follow_supersessions_of
from ._terms import FIRST_ALLOCATED, Member, decode_term_ids
from ._vectors import forget_vectors

__all__ = ('chain_members', 'conversation_tips', 'index_conversation', 'rebuild_index', 'release_members')

_EVENTS = """
CREATE TEMPORARY TABLE temp_rebuild_events AS
WITH RECURSIVE tips(conv_key, k) AS (
    SELECT conv_key, head_key FROM conversations WHERE head_key IS NOT NULL
    UNION SELECT conv_key, entry_key FROM conversation_branches
), reach(conv_key, k) AS (
    SELECT conv_key, k FROM tips
    UNION
    {step}
)
SELECT CASE WHEN reach.k > c.created_seq THEN reach.k ELSE c.created_seq END AS at,
       CASE WHEN reach.k > c.created_seq THEN 0 ELSE 1 END AS late,
       reach.conv_key AS conv_key, reach.k AS entry_key
FROM reach JOIN conversations c ON c.conv_key = reach.conv_key
"""
"""Every membership event of the log, "entry `entry_key` joined conversation `conv_key`", with when it
happened: `(at, late)`, the write of the entry (its key) or, for an entry that existed before the
conversation was created over it, the creation (`created_seq`, after the writes of that moment). The
order `(at, late, conv_key, entry_key)` is the one the incremental index numbered documents in (see
`index._documents`). Every entry a conversation reaches from its head and kept branches is a member, once.
`{step}` is one of `_STEPS`."""

_STEPS = (
    'SELECT reach.conv_key, e.parent_key FROM reach JOIN entries e ON e.entry_key = reach.k '
    'WHERE e.parent_key IS NOT NULL',
    'SELECT reach.conv_key, p.parent_key FROM reach CROSS JOIN LATERAL '
    '(SELECT e.parent_key FROM entries e WHERE e.entry_key = reach.k LIMIT 1) AS p WHERE p.parent_key IS NOT NULL',
)
"""The walk's step up from each reached entry to its parent: joined, where the join order is fixed (an
index probe per entry), or as a `LATERAL` probe a planner cannot turn into a join. Joined, PostgreSQL
hashed the whole `entries` table at every step of the walk, once per message of the longest
conversation (docs/design/store.md, "Bulk reindex")."""

_EVENTS_PAGE = """
SELECT ev.at, ev.late, ev.conv_key, ev.entry_key, c.tenant_id, e.position, e.run_key, e.content_hash, e.unindexed
FROM temp_rebuild_events ev
JOIN entries e ON e.entry_key = ev.entry_key JOIN conversations c ON c.conv_key = ev.conv_key
WHERE (ev.at, ev.late, ev.conv_key, ev.entry_key) > ($1, $2, $3, $4)
ORDER BY ev.at, ev.late, ev.conv_key, ev.entry_key
LIMIT $5
"""
"""The next events after `($1 … $4)`, in event order, with what indexing each needs (keyset paging)."""


BATCH = 20_000
"""Membership events a rebuild indexes at once (`index._bulk.index_events`): enough that a statement's
fixed cost is spread over thousands of messages, few enough that a batch's terms and postings stay
a few tens of megabytes in memory."""


def _event(row: Row) -> Event:
    """An `_EVENTS_PAGE` row as the membership event it is."""
    _, _, conv_key, key, tenant_id, position, run, content, out = row
    member = Member(
        entry_key=int(key), position=position, run_key=run, content_hash=bytes(content), unindexed=bool(out)
    )
    return Event(int(conv_key), int(tenant_id), member)


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


async def rebuild_index(session: Session, progress: Callable[[int, int], None] | None = None) -> int:
    """Drop the index and rebuild it from the log, in membership-event order, with this release's analyzer
    (recorded in `index_settings`). Returns the document count.

    Other writers are kept out of the store's tables for the whole rebuild (`Dialect.lock_tables`);
    readers go on.
    """
    dialect = session.dialect
    tables = (
        'tenants', 'conversations', 'conversation_branches', 'entries', 'runs', 'documents', 'terms', 'posting_blocks',
        'pending_postings', 'index_segments', 'term_documents', 'conversation_documents', 'index_settings',
    )  # fmt: skip
    lock = dialect.lock_tables(tables)
    if lock is not None:
        await session.run(lock)
    for statement in (
        'DELETE FROM posting_blocks',
        'DELETE FROM pending_postings',
        'DELETE FROM index_segments',
        'DELETE FROM term_documents',
        'DELETE FROM conversation_documents',
        'DELETE FROM documents',
        'DELETE FROM terms',
        *dialect.reset_keys('documents', 'doc_id', FIRST_ALLOCATED),
        "DELETE FROM index_settings WHERE name = 'analyzer'",
        'UPDATE tenants SET document_count = 0, total_length = 0',
        'UPDATE conversations SET document_count = 0, total_length = 0',
        dialect.delete_unreferenced('runs', 'run_key', 'entries'),
        dialect.delete_unreferenced('tenants', 'tenant_id', 'conversations'),
    ):
        await session.run(statement)
    # Every membership event, ordered in the database rather than in memory: a rebuild's memory stays
    # one page of events however large the log is.
    await session.run(_EVENTS.format(step=_STEPS[dialect.supports_join_planning]))
    await session.run('CREATE INDEX temp_rebuild_events_order ON temp_rebuild_events (at, late, conv_key, entry_key)')
    total = int(await session.value('SELECT count(*) FROM temp_rebuild_events'))
    if progress is not None:
        progress(0, total)
    done, after = 0, (-1, -1, -1, -1)
    while done < total:
        page = await session.rows(_EVENTS_PAGE, *after, BATCH)
        if not page:  # pragma: no cover - the count was read in this transaction
            break
        done += await index_events(session, [_event(row) for row in page])
        if progress is not None:
            progress(done, total)
        after = tuple(int(value) for value in page[-1][:4])
    await session.run('DROP TABLE temp_rebuild_events')
    await follow_supersessions_of(session, [(int(row[0]), int(row[1])) for row in await session.rows(SUPERSEDING)])
    await session.run("INSERT INTO index_settings (name, value) VALUES ('analyzer', $1)", ANALYZER.key)
    return int(await session.value('SELECT count(*) FROM documents'))
