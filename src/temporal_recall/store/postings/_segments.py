"""Each write's postings and collection statistics as a segment of its own, folded into the blocks and
the counters by a merge. More in docs/design/store.md ("Segments", "Concurrency").
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from ..sql._bulk import Batch, Tail, insert_rows, insert_then
from ..sql._session import Backend, Dialect, Row, Session
from ._blocks import by_segment, postings_by_term, segments_in
from ._tiers import follow_added, follow_removed
from ._writes import KnownTails, NewPostings, append_to_blocks, segment_rows
from ._writes import remove_postings as remove_from_blocks

__all__ = (
    'DIRECT_WRITE',
    'MERGE_BATCH',
    'MERGE_CHUNK',
    'MERGE_POSTINGS',
    'MERGE_SEGMENTS',
    'add_postings',
    'add_to_blocks',
    'merge_if_due',
    'merge_off_path',
    'merge_pending',
    'remove_postings',
    'segment_due',
)

MERGE_SEGMENTS = 64
"""A write that leaves this many segments pending makes them due a merge: a read probes each segment per term."""

MERGE_POSTINGS = 800_000
"""A write that leaves this many postings pending makes them due a merge."""

MERGE_BATCH = 4 * MERGE_SEGMENTS
"""The most segments one merge off the write path takes, oldest first: a merge is bounded however far
behind it is, and the next write that finds them due starts the next one."""

MERGE_CHUNK = 100_000
"""About the most postings a merge decodes and places at once (`merge_pending`); one term's can be more."""

DIRECT_WRITE = 50_000
"""A write of this many postings or more that may merge goes to the blocks directly (after merging what is pending)."""

_log = logging.getLogger('temporal_recall.store')

_EVERY = 2**62
"""A `LIMIT` above any count of rows."""

_PENDING_COLUMNS = (
    ('tenant_id', 'bigint'),
    ('segment', 'bigint'),
    ('term_id', 'bigint'),
    ('first_doc', 'bigint'),
    ('last_doc', 'bigint'),
    ('postings', 'bytea'),
)
_SEGMENT_COLUMNS = (
    ('tenant_id', 'bigint'),
    ('segment', 'bigint'),
    ('document_count', 'bigint'),
    ('total_length', 'bigint'),
    ('postings', 'bigint'),
)


async def add_postings(
    session: Session,
    tenant_id: int,
    new: NewPostings,
    documents: tuple[int, int],
    *,
    merge: bool,
    tail: Tail | None = None,
) -> bool:
    """Add the postings of a write's new documents (`documents`: their count and total length) to the index.

    They go to a segment of their own, keyed by the write's lowest new document id (which no other
    write can hold), in rows no other writer touches; the tenant's statistics are summed from the
    segments at read time until a merge folds them (`merge_pending`). With `merge` (the caller keeps
    the tenant's other writers out, or there are none) a due merge runs here, and a large write goes
    to the blocks directly; otherwise returns whether the segments are due a merge, for the caller to
    start one after its commit (`merge_off_path`). With `tail`, the segment's rows and its count go
    there, sent with the rest of the caller's write, which settles the merge itself (`merge_if_due`).
    """
    if not len(new.term_ids):
        return False
    if merge and len(new.term_ids) >= DIRECT_WRITE:
        await add_to_blocks(session, tenant_id, new, documents)
        return False
    batches, params = _segment_writes(tenant_id, new, documents)
    if tail is not None:
        if tail.reads is not None:
            raise AssertionError('A tail carries one segment count; send it before adding another segment.')
        tail.batches += batches
        tail.reads = (_SEGMENT_COUNT, params)
        return False
    # The count goes with the inserts (`insert_then`): it is the same whether it sees them or not.
    [counts] = await insert_then(session, batches, f'SELECT {", ".join(_SEGMENT_COUNT)}', *params)
    return await merge_if_due(session, tenant_id, counts, merge=merge)


async def add_to_blocks(
    session: Session, tenant_id: int, new: NewPostings, documents: tuple[int, int], known: KnownTails | None = None
) -> None:
    """Add a bulk write's postings (a rebuild's batch: `documents` are its count and total length) to the
    blocks directly, with the counters: what a merge of them as a segment would leave, without writing
    the segment. The tenant's pending segments are merged first, oldest first; the caller keeps the
    tenant's other writers out. `known`: the tails a rebuild keeps (it has no pending segments). A
    rebuild also leaves the tiers to its end (`create_tiers`): following them batch by batch read every
    term's counters and tier again for each batch, a third of a million-message rebuild's time on SQLite."""
    if not len(new.term_ids):
        return
    if known is None:
        await merge_pending(session, tenant_id)
    await append_to_blocks(session, tenant_id, new, known)
    if known is None:
        await follow_added(session, tenant_id, new)
    terms, counts = np.unique(np.asarray(new.term_ids, dtype=np.int64), return_counts=True)
    await _fold(session, tenant_id, list(zip(terms.tolist(), counts.tolist(), strict=True)), documents)


async def merge_if_due(session: Session, tenant_id: int, counts: Row, *, merge: bool) -> bool:
    """After a segment's insert, given what `_SEGMENT_COUNT` read: with `merge` (the caller keeps the
    tenant's other writers out), a due merge runs here; otherwise returns whether one is due."""
    due = segment_due(int(counts[0]), int(counts[1]))
    if due and merge:
        await merge_pending(session, tenant_id)
        return False
    return due


def segment_due(segments: int, postings: int) -> bool:
    """Whether a tenant with `segments` pending segments holding `postings` postings is due a merge."""
    return segments >= MERGE_SEGMENTS or postings >= MERGE_POSTINGS


_SEGMENT_COUNT = (
    '(SELECT count(*) + 1 FROM index_segments WHERE tenant_id = $1 AND segment <> $2)',
    '(SELECT coalesce(sum(postings), 0) + $3 FROM index_segments WHERE tenant_id = $1 AND segment <> $2)',
)
"""The tenant's pending segments and postings with a new one (parameters: tenant, segment, its postings),
read by the statement that inserts it: scalar subqueries that count the tenant's other segments plus
this one, so they are the same whether they see its rows or not."""


def _segment_writes(
    tenant_id: int, new: NewPostings, documents: tuple[int, int]
) -> tuple[list[Batch], tuple[int, int, int]]:
    """The rows of a write's segment, and the parameters of its `_SEGMENT_COUNT`."""
    segment = int(min(new.doc_ids))
    batches = [
        Batch(
            'pending_postings',
            _PENDING_COLUMNS,
            segment_rows(tenant_id, segment, new),
            order_by='d.term_id, d.first_doc',
        ),
        Batch('index_segments', _SEGMENT_COLUMNS, [(tenant_id, segment, *documents, len(new.term_ids))]),
    ]
    return batches, (tenant_id, segment, len(new.term_ids))


async def merge_off_path(backend: Backend, tenant_id: int) -> None:
    """Merge the tenant's oldest segments (at most `MERGE_BATCH`) in a transaction of its own, unless
    another merger of the tenant is at work: its lock is only ever tried, so no writer or merger waits
    for one. Writers go on meanwhile (they write only their own segments); a delete waits for it.

    Runs after the caller's write committed, so a failure is logged (logger `temporal_recall.store`)
    rather than raised: the write stands, the segments stay as they were, and reads see them all.
    """
    dialect = backend.dialect
    try_lock = dialect.try_lock_merge()
    if try_lock is None:
        return

    async def body(session: Session) -> None:
        if not await session.value(try_lock, tenant_id):
            return
        lock = dialect.lock_tenants(exclusive=False)
        if lock is not None:
            await session.run(lock, dialect.array([tenant_id]))
        await merge_pending(session, tenant_id, limit=MERGE_BATCH)

    try:
        await backend.run_write(body)
    except Exception:
        _log.exception('Merging the segments of tenant %d failed; they stay pending until a later merge.', tenant_id)


async def merge_pending(session: Session, tenant_id: int, *, limit: int | None = None) -> None:
    """Fold the tenant's oldest segments (all, or `limit`) into the blocks and counters, and delete them.

    Term range by term range (`_term_ranges`), so a merge holds at most about `MERGE_CHUNK` postings
    decoded at once, whatever it moves: a term's postings all go to its own blocks, so ranges of terms
    are independent merges. One transaction: a merge that fails leaves the segments as they were."""
    dialect = session.dialect
    segments = await session.rows(
        'SELECT segment, document_count, total_length FROM index_segments WHERE tenant_id = $1 '
        'ORDER BY segment LIMIT $2',
        tenant_id,
        _EVERY if limit is None else limit,
    )
    if not segments:
        return
    ids = dialect.array(int(row[0]) for row in segments)
    sizes = await session.rows(_pending_sizes(dialect), tenant_id, ids)
    for low, high in _term_ranges(sizes, MERGE_CHUNK):
        rows = await session.rows(_pending_range(dialect), tenant_id, ids, low, high)
        merged = NewPostings(*postings_by_term(rows))
        await append_to_blocks(session, tenant_id, merged)
        await follow_added(session, tenant_id, merged)
    documents = (sum(int(row[1]) for row in segments), sum(int(row[2]) for row in segments))
    await _fold(session, tenant_id, [(int(row[0]), int(row[1]) // 12) for row in sizes], documents)
    # Segment by segment, each by its key: given the segments as a list, PostgreSQL may take the tenant
    # alone as the index condition (see `by_segment`).
    merged_segments = [(tenant_id, int(row[0])) for row in segments]
    for table in ('pending_postings', 'index_segments'):
        await session.many(f'DELETE FROM {table} WHERE tenant_id = $1 AND segment = $2', merged_segments)  # noqa: S608


async def _fold(
    session: Session, tenant_id: int, term_counts: Sequence[tuple[int, int]], documents: tuple[int, int]
) -> None:
    """Add merged documents to the counters: per term (a document holds a term once, so a term's new
    document count is its number of postings), and the tenant's count and total length."""
    await insert_rows(
        session,
        'term_documents',
        (('tenant_id', 'bigint'), ('term_id', 'bigint'), ('document_count', 'bigint')),
        [(tenant_id, term_id, count) for term_id, count in sorted(term_counts)],
        order_by='d.term_id',
        on_conflict='ON CONFLICT (tenant_id, term_id) DO UPDATE '
        'SET document_count = term_documents.document_count + excluded.document_count',
    )
    if documents[0]:
        await session.run(
            'UPDATE tenants SET document_count = document_count + $1, total_length = total_length + $2 '
            'WHERE tenant_id = $3',
            *documents,
            tenant_id,
        )


def _pending_sizes(dialect: Dialect) -> str:
    """The bytes of each term's rows in segments `$2` (an array): `(term_id, bytes)`, by `by_segment`."""
    return (
        by_segment(dialect, segments_in(dialect, 2), columns='p.term_id, sum(length(p.postings))')
        + ' GROUP BY p.term_id'
    )


def _pending_range(dialect: Dialect) -> str:
    """The rows of segments `$2` (an array) of terms `$3` to `$4`: a range probe per segment (`by_segment`)."""
    return by_segment(dialect, segments_in(dialect, 2), ' AND p.term_id >= $3 AND p.term_id <= $4')


def _term_ranges(sizes: Sequence[Row], chunk: int) -> list[tuple[int, int]]:
    """`(low, high)` term-id ranges, in order, covering the `(term_id, bytes)` rows, each holding about
    `chunk` postings: a range ends at the first term that takes it to `chunk` (one term can exceed it)."""
    terms = np.array([int(row[0]) for row in sizes], dtype=np.int64)
    counts = np.array([int(row[1]) for row in sizes], dtype=np.int64) // 12
    order = np.argsort(terms)
    terms, ends = terms[order], np.cumsum(counts[order])
    ranges: list[tuple[int, int]] = []
    start, done = 0, 0
    while start < len(terms):
        stop = int(np.searchsorted(ends, done + chunk, side='left'))
        stop = min(max(stop, start), len(terms) - 1)
        ranges.append((int(terms[start]), int(terms[stop])))
        done, start = int(ends[stop]), stop + 1
    return ranges


async def remove_postings(session: Session, doomed: Sequence[tuple[int, int, int]]) -> None:
    """Take documents out of the index (`doomed`: `(tenant_id, term_id, doc_id)`): their tenants'
    segments are merged first (the caller keeps the tenant's writers out), so only blocks are rewritten."""
    for tenant_id in sorted({tenant_id for tenant_id, _, _ in doomed}):
        await merge_pending(session, tenant_id)
    await remove_from_blocks(session, doomed)
    await follow_removed(session, doomed)
