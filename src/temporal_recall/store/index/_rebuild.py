"""Rebuilding the index from the log: the whole store's (a migration's), or one tenant's (`recall reindex`).
More in docs/design/store.md ("Bulk reindex").

Both replay the log's membership events in the order they happened (`_EVENTS`, see
`index._documents`), so the rebuilt index numbers documents as the incremental one did, and index
them in large batches (`index._bulk.index_events`). A tenant's index is its own rows (documents,
blocks, segments, counters, and its conversations' memberships and counters), so one tenant can be
rebuilt while the others' writers go on; the shared vocabulary (`terms`) is only ever added to.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from temporal_recall.text._analyzer import ANALYZER

from ..postings._tiers import create_tiers
from ..sql._session import Dialect, Row, Session
from ._ahead import Analysis
from ._bulk import Event, Rebuilding, index_events
from ._superseded import SUPERSEDING, follow_supersessions_of
from ._terms import FIRST_ALLOCATED, Member

__all__ = ('BATCH', 'Progress', 'count_events', 'rebuild_index', 'rebuild_tenant', 'record_analyzer')

Progress = Callable[[int, int], None]
"""`progress(done, total)`: membership events replayed so far, of all there are."""

BATCH = 20_000
"""Membership events indexed at once (`index._bulk.index_events`): enough that a statement's fixed cost
is spread over thousands of messages, few enough that a batch's terms and postings stay small in memory."""

_WALK = """
WITH RECURSIVE tips(conv_key, k) AS (
    SELECT conv_key, head_key FROM conversations WHERE head_key IS NOT NULL {tenant}
    UNION SELECT b.conv_key, b.entry_key FROM conversation_branches b
    JOIN conversations c ON c.conv_key = b.conv_key WHERE true {tenant}
), reach(conv_key, k) AS (
    SELECT conv_key, k FROM tips
    UNION
    {step}
)
"""
"""Every entry each conversation (`{tenant}`: each of one tenant's conversations, `$1`) reaches from its
head and kept branches, once: `reach(conv_key, k)`. `{step}` is one of `_STEPS`."""

_EVENTS = """
INSERT INTO temp_rebuild_events (at, late, conv_key, entry_key)
SELECT CASE WHEN reach.k > c.created_seq THEN reach.k ELSE c.created_seq END,
       CASE WHEN reach.k > c.created_seq THEN 0 ELSE 1 END,
       reach.conv_key, reach.k
FROM reach JOIN conversations c ON c.conv_key = reach.conv_key
"""
"""After `_WALK`: every membership event of the log, "entry `entry_key` joined conversation `conv_key`",
with when it happened: `(at, late)`, the write of the entry (its key) or, for an entry that existed
before the conversation was created over it, the creation (`created_seq`, after the writes of that
moment). The order `(at, late, conv_key, entry_key)` is the one the incremental index numbered
documents in (see `index._documents`). Every entry a conversation reaches is a member, once."""

_COUNT = (
    'SELECT c.tenant_id, count(*) FROM reach JOIN conversations c ON c.conv_key = reach.conv_key GROUP BY c.tenant_id'
)
"""After `_WALK`: each tenant's number of membership events."""

_STEPS = (
    'SELECT reach.conv_key, e.parent_key FROM reach JOIN entries e ON e.entry_key = reach.k '
    'WHERE e.parent_key IS NOT NULL',
    'SELECT reach.conv_key, p.parent_key FROM reach CROSS JOIN LATERAL '
    '(SELECT e.parent_key FROM entries e WHERE e.entry_key = reach.k LIMIT 1) AS p WHERE p.parent_key IS NOT NULL',
)
"""The walk's step up from each reached entry to its parent: joined, where the join order is fixed (an
index probe per entry), or as a `LATERAL` probe a planner cannot turn into a join. Joined, PostgreSQL
hashed the whole `entries` table at every step of the walk, once per message of the longest
conversation."""

_EVENTS_PAGE = """
SELECT ev.at, ev.late, ev.conv_key, ev.entry_key, c.tenant_id, e.position, e.run_key, e.content_hash, e.unindexed
FROM temp_rebuild_events ev
JOIN entries e ON e.entry_key = ev.entry_key JOIN conversations c ON c.conv_key = ev.conv_key
WHERE (ev.at, ev.late, ev.conv_key, ev.entry_key) > ($1, $2, $3, $4)
ORDER BY ev.at, ev.late, ev.conv_key, ev.entry_key
LIMIT $5
"""
"""The next events after `($1 … $4)`, in event order, with what indexing each needs (keyset paging)."""

_STORE_TABLES = (
    'tenants', 'conversations', 'conversation_branches', 'entries', 'runs', 'documents', 'terms', 'posting_blocks',
    'posting_tiers', 'term_tiers', 'posting_deep_tiers', 'term_deep_tiers', 'pending_postings', 'index_segments',
    'term_documents', 'conversation_documents', 'index_settings',
)  # fmt: skip

_TENANT_INDEX = (
    'DELETE FROM posting_blocks WHERE tenant_id = $1',
    'DELETE FROM posting_tiers WHERE tenant_id = $1',
    'DELETE FROM term_tiers WHERE tenant_id = $1',
    'DELETE FROM posting_deep_tiers WHERE tenant_id = $1',
    'DELETE FROM term_deep_tiers WHERE tenant_id = $1',
    'DELETE FROM pending_postings WHERE tenant_id = $1',
    'DELETE FROM index_segments WHERE tenant_id = $1',
    'DELETE FROM term_documents WHERE tenant_id = $1',
    'DELETE FROM conversation_documents WHERE conv_key IN (SELECT conv_key FROM conversations WHERE tenant_id = $1)',
    'DELETE FROM documents WHERE tenant_id = $1',
    'UPDATE tenants SET document_count = 0, total_length = 0 WHERE tenant_id = $1',
    'UPDATE conversations SET document_count = 0, total_length = 0 WHERE tenant_id = $1',
)
"""A tenant's index, emptied: every row of it is keyed by the tenant or by one of its conversations."""


async def rebuild_index(session: Session, progress: Progress | None = None) -> int:
    """Drop the whole index and rebuild it from the log, in one transaction, with this release's analyzer
    (recorded in `index_settings`): a migration's rebuild. Returns the document count.

    Other writers are kept out of the store's tables for the whole rebuild (`Dialect.lock_tables`);
    readers go on. The vocabulary is rebuilt too, and the document ids above the derived ones
    (`FIRST_ALLOCATED`) are allocated afresh.
    """
    dialect = session.dialect
    lock = dialect.lock_tables(_STORE_TABLES)
    if lock is not None:
        await session.run(lock)
    for statement in (
        'DELETE FROM posting_blocks',
        'DELETE FROM posting_tiers',
        'DELETE FROM term_tiers',
        'DELETE FROM posting_deep_tiers',
        'DELETE FROM term_deep_tiers',
        'DELETE FROM pending_postings',
        'DELETE FROM index_segments',
        'DELETE FROM term_documents',
        'DELETE FROM conversation_documents',
        'DELETE FROM documents',
        'DELETE FROM terms',
        *dialect.reset_keys('documents', 'doc_id', FIRST_ALLOCATED),
        'UPDATE tenants SET document_count = 0, total_length = 0',
        'UPDATE conversations SET document_count = 0, total_length = 0',
        dialect.delete_unreferenced('runs', 'run_key', 'entries'),
        dialect.delete_unreferenced('tenants', 'tenant_id', 'conversations'),
    ):
        await session.run(statement)
    await _replay(session, None, progress)
    await follow_supersessions_of(session, [(int(row[0]), int(row[1])) for row in await session.rows(SUPERSEDING)])
    await record_analyzer(session)
    return int(await session.value('SELECT count(*) FROM documents'))


async def rebuild_tenant(session: Session, tenant_id: int, progress: Progress | None = None) -> int:
    """Drop one tenant's index and rebuild it from the log, in the caller's transaction; the caller keeps
    the tenant's writers out (its conversations' rows, then the tenant's lock, exclusive, in the order
    every writer takes them). Returns the number of membership events replayed.

    The result is the tenant's part of what `rebuild_index` builds, with two differences no search can
    see: terms are kept (the vocabulary is shared by every tenant, and a term without postings is
    allowed), and a document whose derived id another tenant holds takes a newly allocated id, in the
    same order as before, still above every derived one.
    """
    for statement in _TENANT_INDEX:
        await session.run(statement, tenant_id)
    events = await _replay(session, tenant_id, progress)
    superseding = [(int(row[0]), int(row[1])) for row in await session.rows(SUPERSEDING) if int(row[1]) == tenant_id]
    await follow_supersessions_of(session, superseding)
    return events


async def record_analyzer(session: Session) -> None:
    """Record this release's analyzer as the one that built the index (`index_settings`)."""
    await session.run("DELETE FROM index_settings WHERE name = 'analyzer'")
    await session.run("INSERT INTO index_settings (name, value) VALUES ('analyzer', $1)", ANALYZER.key)


async def _replay(session: Session, tenant_id: int | None, progress: Progress | None) -> int:
    """Index every membership event of the log (of `tenant_id`'s conversations, or all), in event order, in
    batches of `BATCH`; returns how many there were. Ordered in the database rather than in memory: the
    memory a rebuild takes is one batch's, however large the log is."""
    dialect = session.dialect
    await session.run(
        'CREATE TEMPORARY TABLE temp_rebuild_events (at BIGINT, late INTEGER, conv_key BIGINT, entry_key BIGINT)'
    )
    if tenant_id is None:
        await session.run(_walk(dialect, tenant=False) + _EVENTS)
    else:
        await session.run(_walk(dialect, tenant=True) + _EVENTS, tenant_id)
    await session.run('CREATE INDEX temp_rebuild_events_order ON temp_rebuild_events (at, late, conv_key, entry_key)')
    total = int(await session.value('SELECT count(*) FROM temp_rebuild_events'))
    if progress is not None:
        progress(0, total)
    done = 0
    known = Rebuilding()  # The index of the tenants replayed was deleted in this transaction.
    with Analysis(total) as analysis:
        events = await _page(session, (-1, -1, -1, -1))
        ahead = await analysis.ahead(session, events)
        while events:
            # The next batch is read and sent to be analysed (`index._ahead`) before this one is written.
            following = await _page(session, events[-1].order) if done + len(events) < total else []
            analysed = await analysis.result(session, ahead)
            ahead = await analysis.ahead(session, following)
            done += await index_events(session, events, known, analysed)
            if progress is not None:
                progress(done, total)
            events = following
    await session.run('DROP TABLE temp_rebuild_events')
    await create_tiers(session, tenant_id)  # The batches left them (`add_to_blocks`).
    return total


async def count_events(session: Session) -> dict[int, int]:
    """Each tenant's number of membership events (those of a tenant without conversations: none)."""
    rows = await session.rows(_walk(session.dialect, tenant=False) + _COUNT)
    return {int(row[0]): int(row[1]) for row in rows}


def _walk(dialect: Dialect, *, tenant: bool) -> str:
    return _WALK.format(step=_STEPS[dialect.supports_join_planning], tenant='AND tenant_id = $1' if tenant else '')


async def _page(session: Session, after: tuple[int, int, int, int]) -> list[_Replayed]:
    """The `BATCH` events after `after`, in event order (keyset paging)."""
    return [_event(row) for row in await session.rows(_EVENTS_PAGE, *after, BATCH)]


@dataclass(frozen=True)
class _Replayed(Event):
    """A membership event with its place in the replay's order: `(at, late, conv_key, entry_key)`."""

    order: tuple[int, int, int, int]


def _event(row: Row) -> _Replayed:
    """An `_EVENTS_PAGE` row as the membership event it is."""
    at, late, conv_key, key, tenant_id, position, run, content, out = row
    member = Member(
        entry_key=int(key), position=position, run_key=run, content_hash=bytes(content), unindexed=bool(out)
    )
    return _Replayed(int(conv_key), int(tenant_id), member, (int(at), int(late), int(conv_key), int(key)))
