"""A write's postings as a segment of their own, merged into the blocks a few writes later.

Appending to each term's tail block (`_block_writes`) rewrites one row per distinct term of the
write, at keys spread over the whole `posting_blocks` table: a hundred-message append touches some
eight thousand tails, so thousands of database pages, and a page costs more to reach as the table
grows. So a write puts its postings in `pending_postings` instead, keyed by the tenant's write
number (`segment`) first: one run of rows at the end of the table, a few dozen pages. A write that
leaves `MERGE_SEGMENTS` segments or `MERGE_POSTINGS` postings pending then moves them all into the
blocks, in its own transaction: amortised (a term the merged writes share costs one tail rewrite,
not one per write), bounded by those two limits, and crash-safe (a failed write leaves the segments
and the blocks as they were).

Measured (100-message appends of `scripts/bench_search.py`'s corpus, 20,000 messages, SQLite, each
configuration filled in turn in one run): 781 and 662 msg/s appending to tails, against 916 and 754
merging every 16 segments and 1,075 and 859 every 64, the rate no longer falling as the store
grows; at 1,000,000 messages with 32 segments, 935 → 826 msg/s over the fill (799 overall) against
765 → 475 (512) appending to tails (README, "At scale"). Larger merges amortise better, and since a
merge moves its postings range by range (below) they cost no more memory, but they leave more
segments for each read to probe and pause a write for longer. 64 segments or 800,000 postings, by
measurement (100,000 messages filled per configuration, alternating, twice or more each): 32 and
400,000 filled at 1,176-1,280 msg/s overall, falling 12-26% from the first tenth to the last; 64
and 800,000 at 1,377-1,478, falling at most 15%; 96 and 1,200,000 at 1,314-1,397. Searches of
every class measured the same within the machine's noise. Two-message appends into a 20,000-message
store: mean 5.6-6.2 ms against 5.7-5.9, p99 69-74 against 84-88 ms (a merge's pause, rarer and
longer). On
PostgreSQL segments gained nothing on writes (10,000 messages: 478 and 483 msg/s to tails, 472 and
466 with segments; 100,000 messages: 728 against 721), and each merge leaves its deleted rows to
vacuum: without autovacuum (as on this project's test server) `pending_postings` grew to 6.9 KB
per message at 100,000 messages, doubling the store. They did help reads, because a merge writes
a term's new blocks side by side where tail rewrites scatter them over the heap: a common-word
search read its blocks in 5.5 ms against 8.3 (100,000 messages, vacuumed). Not enough to pay for
a store that only stays small under autovacuum, so its dialect writes none
(`Dialect.writes_segments`): a store written without segments never holds pending rows.

What a read sees does not change. `_blocks.read_blocks` and `_blocks.read_overlapping` take a
term's pending rows along with its blocks, as blocks of their own: a merge moves all of a tenant's
segments, so every pending posting is of a document newer than any the term's blocks hold. The
tenant's `pending_segments` counts the segments (numbered from 0 since the last merge), which is how
a read enumerates them with an index probe each; `pending_postings` counts their postings.

A merge moves its postings term range by term range (`MERGE_CHUNK` postings at a time): each term's
pending postings go to that term's blocks only, so ranges of terms are merges of their own, and a
merge's memory no longer grows with its size. Decoded whole, a merge of 400,000 postings took
the peak resident memory of a process filling 30,000 messages from 100 MB to 268 MB, and one of
1,200,000 to 421 MB; by ranges of 100,000, 223 and 226 MB.

A large write (an import, a reindex batch: `DIRECT_WRITE` postings or more) is a merge's worth on
its own: it merges what is pending, oldest first, then goes to the blocks directly. Taking documents
out merges first too, so a delete only ever rewrites blocks.
"""

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
    if not session.dialect.writes_segments:
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
