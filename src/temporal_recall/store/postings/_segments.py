"""A write's postings as a segment of their own, merged into the blocks a few writes later. More in docs/store.md."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..sql._bulk import insert_rows
from ..sql._session import Dialect, Row, Session
from ._blocks import SEGMENTS, postings_by_term
from ._writes import NewPostings, append_to_blocks, block_rows, check_postings
from ._writes import remove_postings as remove_from_blocks

__all__ = (
    'DIRECT_WRITE',
    'MERGE_CHUNK',
    'MERGE_POSTINGS',
    'MERGE_SEGMENTS',
    'add_postings',
    'merge_pending',
    'remove_postings',
)

MERGE_SEGMENTS = 64
"""A write that leaves this many segments pending merges them: a read probes each segment per term."""

MERGE_POSTINGS = 800_000
"""A write that leaves this many postings pending merges them (9.6 MB of segments)."""

MERGE_CHUNK = 100_000
"""About the most postings a merge decodes and places at once (`merge_pending`); one term's can be more."""

DIRECT_WRITE = 50_000
"""A write of this many postings or more goes to the blocks directly (after merging what is pending)."""

_PENDING_COLUMNS = (
    ('tenant_id', 'bigint'),
    ('segment', 'int'),
    ('term_id', 'bigint'),
    ('first_doc', 'bigint'),
    ('last_doc', 'bigint'),
    ('postings', 'bytea'),
)


async def add_postings(session: Session, tenant_id: int, new: NewPostings) -> None:
    """Add `new` (postings of documents newer than any of the tenant's indexed ones) to the index."""
    if not len(new.term_ids):
        return
    if not session.dialect.prefer_segment_writes:
        await append_to_blocks(session, tenant_id, new)
        return
    if len(new.term_ids) >= DIRECT_WRITE:
        await merge_pending(session, tenant_id)
        await append_to_blocks(session, tenant_id, new)
        return
    check_postings(new)  # `append_to_blocks` checks the postings it writes; a segment's are checked here.
    counters = await session.one(
        'UPDATE tenants SET pending_segments = pending_segments + 1, pending_postings = pending_postings + $2 '
        'WHERE tenant_id = $1 RETURNING pending_segments, pending_postings',
        tenant_id,
        len(new.term_ids),
    )
    assert counters is not None, 'the caller created the tenant'
    segments, pending = int(counters[0]), int(counters[1])
    # The block rows of a write with no tails: each term's postings in rows of up to `BLOCK`.
    rows = [(tenant_id, segments - 1, *row[1:4], row[6]) for row in block_rows(tenant_id, new, ())]
    await insert_rows(session, 'pending_postings', _PENDING_COLUMNS, rows, order_by='d.term_id, d.first_doc')
    if segments >= MERGE_SEGMENTS or pending >= MERGE_POSTINGS:
        await merge_pending(session, tenant_id)


async def merge_pending(session: Session, tenant_id: int) -> None:
    """Move the tenant's pending postings into their terms' blocks, oldest first, and empty the segments.

    Term range by term range (`_term_ranges`), so a merge holds at most about `MERGE_CHUNK` postings
    decoded at once, whatever it moves: a term's postings all go to its own blocks, so ranges of terms
    are independent merges."""
    sizes = await session.rows(
        'SELECT term_id, sum(length(postings)) FROM pending_postings WHERE tenant_id = $1 GROUP BY term_id', tenant_id
    )
    if not sizes:
        return
    for low, high in _term_ranges(sizes, MERGE_CHUNK):
        rows = await session.rows(_pending_range(session.dialect), tenant_id, low, high)
        await append_to_blocks(session, tenant_id, NewPostings(*postings_by_term(rows)))
    await session.run('DELETE FROM pending_postings WHERE tenant_id = $1', tenant_id)
    await session.run('UPDATE tenants SET pending_segments = 0, pending_postings = 0 WHERE tenant_id = $1', tenant_id)


def _pending_range(dialect: Dialect) -> str:
    """The tenant's pending rows of terms `$2` to `$3`: one range probe per segment (the key leads with it)."""
    return (
        f'{SEGMENTS}SELECT p.term_id, p.first_doc, p.postings FROM pending_postings p WHERE p.tenant_id = $1 '  # noqa: S608
        f'AND p.segment {dialect.in_select("SELECT n FROM segment")} AND p.term_id >= $2 AND p.term_id <= $3'
    )


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
    """Take documents out of the index (`doomed`: `(tenant_id, term_id, doc_id)`): their tenants' pending
    postings are merged first, so only blocks are rewritten."""
    for tenant_id in sorted({tenant_id for tenant_id, _, _ in doomed}):
        await merge_pending(session, tenant_id)
    await remove_from_blocks(session, doomed)
