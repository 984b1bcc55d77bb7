"""Writing posting blocks (`postings._blocks`): adding postings to their terms' blocks, and taking documents out.
More in docs/design/store.md.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from itertools import groupby
from typing import Any, NamedTuple, cast

import numpy as np
from numpy.typing import NDArray

from ..sql._bulk import CHUNK, delete_rows, insert_rows, run_batch
from ..sql._session import Row, Session
from . import _blocks
from ._blocks import BLOCKS, WORDS, BlockTable, checked_table, decode, encode, run_starts, select_overlapping

__all__ = (
    'SMALL_WRITE',
    'KnownTails',
    'NewPostings',
    'append_to_blocks',
    'block_rows',
    'check_postings',
    'remove_postings',
    'segment_rows',
    'spans',
    'unplaced_rows',
)

_OFFSETS = 1 << 32
"""A block's documents lie less than this above its `first_doc` (the offset is 32 bits)."""

NO_FRONT = b''
"""What a new block row's `front` column holds: nothing. In rows that have one, the column (version 7)
holds each block's highest frequency and shortest length, a bound no search reads; it stays, since
dropping it would rewrite every block (docs/design/store.md)."""

_COLUMNS = (
    ('tenant_id', 'bigint'),
    ('term_id', 'bigint'),
    ('first_doc', 'bigint'),
    ('last_doc', 'bigint'),
    ('count', 'int'),
    ('front', 'bytea'),
    ('postings', 'bytea'),
)
_TIER_COLUMNS = _COLUMNS[:5] + _COLUMNS[6:]
"""The tiers' tables (`posting_tiers`, `posting_deep_tiers`) have no `front`."""


def _stored(table: BlockTable, rows: list[tuple[Any, ...]]) -> tuple[Sequence[tuple[str, str]], list[tuple[Any, ...]]]:
    """The columns and rows to write block `rows` (`_COLUMNS`) into `table`."""
    if table == BLOCKS:
        return _COLUMNS, rows
    return _TIER_COLUMNS, [row[:5] + row[6:] for row in rows]


def _row(tenant_id: int, term_id: int, first_doc: int, postings: Sequence[tuple[int, int, int]]) -> tuple[Any, ...]:
    """A block's row holding `postings` (`(doc_id, term_frequency, length)`)."""
    doc_ids, frequencies, lengths = zip(*postings, strict=True)
    return (
        tenant_id,
        term_id,
        first_doc,
        doc_ids[-1],
        len(doc_ids),
        NO_FRONT,
        encode(first_doc, doc_ids, frequencies, lengths),
    )


Column = Sequence[int] | NDArray[np.integer[Any]]
"""A column of `NewPostings`: a list (a step's few postings) or an array (a merge's many)."""


class NewPostings(NamedTuple):
    """The postings a write adds: one per index of four aligned columns, each term's `doc_ids` ascending."""

    term_ids: Column
    doc_ids: Column
    frequencies: Column
    lengths: Column


class KnownTails:
    """Each term's last block, `(first_doc, count, last_doc)`, per tenant, as a rebuild writes them: what
    `_last_blocks` would read, kept in memory by a rebuild that emptied the tenants' blocks in its own
    transaction and keeps their other writers out, so a term it has not written has no block.

    Why not probe: the blocks the rebuild deleted stay in PostgreSQL's index until the transaction ends,
    so a probe for a term's last block walks the entries of every deleted block above the new tail (a
    common term's thousands, at the start of a million-message rebuild), checking each one's row.
    """

    def __init__(self) -> None:
        self.by_tenant: dict[int, dict[int, tuple[int, int, int]]] = {}

    def last_blocks(self, tenant_id: int, term_ids: Sequence[int]) -> list[Row]:
        known = self.by_tenant.get(tenant_id, {})
        return [(term_id, *known[term_id]) for term_id in term_ids if term_id in known]

    def record(self, tenant_id: int, rows: Sequence[Sequence[Any]]) -> None:
        """Follow the upsert of block `rows` (`_COLUMNS`, each term's in ascending `first_doc`)."""
        known = self.by_tenant.setdefault(tenant_id, {})
        for _, term_id, first_doc, last_doc, count, _, _ in rows:
            tail = known.get(term_id)
            if tail is not None and tail[0] == first_doc:  # Appended to the open tail.
                known[term_id] = (first_doc, tail[1] + count, last_doc)
            else:
                known[term_id] = (first_doc, count, last_doc)

    def reread(self, tenant_id: int, rows: Sequence[Row]) -> None:
        known = self.by_tenant.setdefault(tenant_id, {})
        known.update((int(row[0]), (int(row[1]), int(row[2]), int(row[3]))) for row in rows)


SMALL_WRITE = 256
"""Up to this many postings, a write places them in Python (`_rows_in_python`); more, as arrays
(`_rows_as_arrays`), where arrays start to pay (docs/benchmarks/history.md). Most writes are a step's few
messages; imports and rebuilds are large."""


async def _last_blocks(
    session: Session, tenant_id: int, term_ids: Sequence[int], table: BlockTable = BLOCKS
) -> list[Row]:
    """`(term_id, first_doc, count, last_doc)` of each term's last block, by term.

    One index probe per term, whatever the tenant's size. A planner that chooses joins itself is
    given a `LATERAL` probe to run: joined instead, PostgreSQL hashed every block of the tenant on
    each write whenever its statistics lagged the table's growth, a cost growing with the tenant.
    """
    dialect = session.dialect
    if dialect.supports_join_planning:
        sql = (
            f'SELECT value, b.first_doc, b.count, b.last_doc FROM {dialect.each(2, "bigint")} CROSS JOIN LATERAL '  # noqa: S608
            f'(SELECT x.first_doc, x.count, x.last_doc FROM {checked_table(table)} x '
            'WHERE x.tenant_id = $1 AND x.term_id = value ORDER BY x.first_doc DESC LIMIT 1) AS b ORDER BY value'
        )
    else:
        sql = (
            f'SELECT value, b.first_doc, b.count, b.last_doc FROM {dialect.each(2, "bigint")} '  # noqa: S608
            f'{dialect.join_in_order} {checked_table(table)} b ON b.tenant_id = $1 AND b.term_id = value '
            f'AND b.first_doc = (SELECT max(x.first_doc) FROM {table} x '
            'WHERE x.tenant_id = $1 AND x.term_id = value) ORDER BY value'
        )
    tails: list[Row] = []
    for start in range(0, len(term_ids), CHUNK):
        tails += await session.rows(sql, tenant_id, dialect.array(term_ids[start : start + CHUNK]))
    return tails


def _rows_in_python(tenant_id: int, new: NewPostings, tails: Sequence[Row], block: int) -> list[tuple[Any, ...]]:
    """The block rows (of at most `block` postings) for a small write (`SMALL_WRITE`), given its terms' open `tails`."""
    open_tails = {int(tail[0]): (int(tail[1]), int(tail[2])) for tail in tails}
    by_term: dict[int, list[tuple[int, int, int]]] = {}
    for term_id, posting in zip(new.term_ids, zip(new.doc_ids, new.frequencies, new.lengths, strict=True), strict=True):
        by_term.setdefault(term_id, []).append(posting)
    rows: list[tuple[Any, ...]] = []
    for term_id in sorted(by_term):
        postings, start = by_term[term_id], 0
        tail = open_tails.get(term_id)
        if tail is not None and postings[-1][0] - tail[0] < _OFFSETS:
            start = min(block - tail[1], len(postings))
            rows.append(_row(tenant_id, term_id, tail[0], postings[:start]))
        rows += (
            _row(tenant_id, term_id, postings[at][0], postings[at : at + block])
            for at in range(start, len(postings), block)
        )
    return rows


def _rows_as_arrays(tenant_id: int, new: NewPostings, tails: Sequence[Row], block: int) -> list[tuple[Any, ...]]:
    """The block rows for a large write, given its terms' open `tails`: `_rows_in_python`'s, worked out
    with numpy (a hundred messages add some ten thousand postings to a few thousand blocks)."""
    count = len(new.term_ids)
    order = np.argsort(np.asarray(new.term_ids, dtype=np.int64), kind='stable')  # Each term's documents ascending.
    terms, docs, frequencies, lengths = (np.asarray(column, dtype=np.int64)[order] for column in new)
    firsts_of_terms = run_starts(terms)
    per_term = np.diff(firsts_of_terms, append=count)
    room, tail_first = (np.zeros(len(per_term), dtype=np.int64) for _ in range(2))
    if tails:  # The tails are of the write's own terms (`_last_blocks` reads no other).
        tail_terms, tail_firsts, tail_counts = np.array([tail[:3] for tail in tails], dtype=np.int64).T
        at = np.searchsorted(terms[firsts_of_terms], tail_terms)
        fits = docs[firsts_of_terms + per_term - 1][at] - tail_firsts < _OFFSETS
        room[at[fits]] = block - tail_counts[fits]
        tail_first[at] = tail_firsts
    # A term's postings fill its tail's room, then blocks of `block`: number -1 is the tail.
    rank = np.arange(count) - np.repeat(firsts_of_terms, per_term)
    room_of = np.repeat(room, per_term)
    number = np.where(rank < room_of, -1, (rank - room_of) // block)
    starts = run_starts(terms, number)
    sizes = np.diff(starts, append=count)
    owner = np.searchsorted(firsts_of_terms, starts, side='right') - 1  # Each block's term.
    on_tail = number[starts] < 0
    first_docs = np.where(on_tail, tail_first[owner], docs[starts])
    encoded = np.empty((count, 3), dtype=WORDS)
    encoded[:, 0] = docs - np.repeat(first_docs, sizes)
    encoded[:, 1], encoded[:, 2] = frequencies, lengths
    stored = encoded.tobytes()
    ends = (starts + sizes) * 12
    return [
        (tenant_id, term_id, first_doc, last_doc, size, NO_FRONT, stored[start * 12 : end])
        for term_id, first_doc, last_doc, size, start, end in zip(
            terms[starts].tolist(),
            first_docs.tolist(),
            docs[starts + sizes - 1].tolist(),
            sizes.tolist(),
            starts.tolist(),
            ends.tolist(),
            strict=True,
        )
    ]


def check_postings(new: NewPostings) -> None:
    """Refuse postings a block cannot hold: documents 2**32 ids apart or more, or counts of 2**32 or more."""
    doc_ids = np.asarray(new.doc_ids, dtype=np.int64)
    counts = max(int(np.max(new.frequencies)), int(np.max(new.lengths)))
    if int(doc_ids.max()) - int(doc_ids.min()) >= _OFFSETS or counts >= _OFFSETS:
        raise ValueError('Postings need documents less than 2**32 ids apart in one write, and counts under 2**32.')


def block_rows(
    tenant_id: int, new: NewPostings, tails: Sequence[Row], table: BlockTable = BLOCKS
) -> list[tuple[Any, ...]]:
    """The block rows of `table` holding `new` (by term, each term's documents ascending), given its terms'
    open `tails`."""
    block = _blocks.block_size(table)
    if len(new.term_ids) > SMALL_WRITE:
        return _rows_as_arrays(tenant_id, new, tails, block)
    lists = (column.tolist() if isinstance(column, np.ndarray) else column for column in new)
    return _rows_in_python(tenant_id, NewPostings(*lists), tails, block)  # A merge's few postings come as arrays.


def unplaced_rows(tenant_id: int, new: NewPostings) -> list[tuple[Any, ...]]:
    """The block rows holding `new` (one `spans` part) as if its terms had no blocks yet: a segment's rows."""
    return block_rows(tenant_id, new, ())


_ONE = struct.Struct('<3I')
"""A block of one posting as `_blocks.encode` stores it (its offset is 0)."""


def segment_rows(tenant_id: int, segment: int, new: NewPostings) -> list[tuple[Any, ...]]:
    """`(tenant_id, segment, term_id, first_doc, last_doc, postings)`: the rows of `unplaced_rows`, checked
    (`check_postings`), as segment `segment` of a write holds them, by term.

    A step's write (`SMALL_WRITE`) is placed here without arrays or a call per block: most of its
    terms have one posting, a block `_ONE` packs, and building `unplaced_rows` for each `spans` part
    costs several times as much (docs/benchmarks/history.md).
    """
    if len(new.term_ids) > SMALL_WRITE or not all(isinstance(column, list) for column in new):
        rows: list[tuple[Any, ...]] = []
        for span in spans(new):
            check_postings(span)
            rows += [(tenant_id, segment, *row[1:4], row[6]) for row in unplaced_rows(tenant_id, span)]
        return rows
    doc_ids = cast('list[int]', new.doc_ids)
    lowest, highest = min(doc_ids), max(doc_ids)
    if highest - lowest >= _OFFSETS // 2:  # Documents of allocated ids: more than one `spans` part.
        return segment_rows(tenant_id, segment, NewPostings(*(np.asarray(column) for column in new)))
    if max(max(cast('list[int]', new.frequencies)), max(cast('list[int]', new.lengths))) >= _OFFSETS:
        check_postings(new)  # raises
    by_term: dict[int, list[tuple[int, int, int]]] = {}
    for term_id, doc_id, frequency, length in zip(*new, strict=True):
        by_term.setdefault(term_id, []).append((doc_id, frequency, length))
    rows = []
    for term_id in sorted(by_term):
        postings = by_term[term_id]
        if len(postings) == 1:
            doc_id, frequency, length = postings[0]
            rows.append((tenant_id, segment, term_id, doc_id, doc_id, _ONE.pack(0, frequency, length)))
            continue
        for at in range(0, len(postings), _blocks.BLOCK):
            block = postings[at : at + _blocks.BLOCK]
            first = block[0][0]
            doc_ids_, frequencies, lengths = zip(*block, strict=True)
            rows.append(
                (tenant_id, segment, term_id, first, block[-1][0], encode(first, doc_ids_, frequencies, lengths))
            )
    return rows


def spans(new: NewPostings) -> list[NewPostings]:
    """`new` (ordered by document, or grouped by term with each term's documents ascending) in parts
    whose document ids lie less than 2**31 apart, in ascending order of ids: what one block can hold.
    One part, unless the write holds documents of allocated ids (`index._terms.FIRST_ALLOCATED`)."""
    doc_ids = np.asarray(new.doc_ids, dtype=np.int64)
    if not len(doc_ids) or int(doc_ids.max()) - int(doc_ids.min()) < _OFFSETS // 2:
        return [new]
    buckets = doc_ids >> 31
    parts: list[NewPostings] = []
    for bucket in np.unique(buckets).tolist():
        keep = np.flatnonzero(buckets == bucket)
        parts.append(NewPostings(*(np.asarray(column, dtype=np.int64)[keep] for column in new)))
    return parts


async def append_to_blocks(
    session: Session, tenant_id: int, new: NewPostings, known: KnownTails | None = None, table: BlockTable = BLOCKS
) -> None:
    """Add `new` to their terms' blocks in `table`. `new` (lists or arrays) is grouped by term or ordered by
    document, each term's documents ascending either way.

    A term whose new documents all follow its last block (the common case) is appended: one read of
    the terms' last blocks, then one upsert per block touched, in term order (the lock order every
    writer of blocks takes, so two cannot deadlock): a tail grows by concatenation in the database,
    new blocks are inserted; a tail too far below them for 32-bit offsets is left as it is. A term
    with a new document below its last block's (a write that committed after a merge of later ones,
    a document created for an older entry) has its blocks from that document on rewritten
    (`_rewrite_late`).
    """
    if not len(new.term_ids):
        return
    for part in spans(new):
        await _append_span(session, tenant_id, part, known, checked_table(table))


async def _append_span(
    session: Session, tenant_id: int, new: NewPostings, known: KnownTails | None, table: BlockTable
) -> None:
    check_postings(new)
    term_ids = np.asarray(new.term_ids, dtype=np.int64)
    doc_ids = np.asarray(new.doc_ids, dtype=np.int64)
    terms = np.unique(term_ids)
    if known is None:
        lasts = await _last_blocks(session, tenant_id, terms.tolist(), table)
    else:
        lasts = known.last_blocks(tenant_id, terms.tolist())
    lowest = {int(term): int(low) for term, low in zip(terms, _lowest(term_ids, doc_ids, terms), strict=True)}
    late = {int(row[0]) for row in lasts if lowest[int(row[0])] <= int(row[3])}
    block = _blocks.block_size(table)
    tails = [row[:3] for row in lasts if int(row[0]) not in late and int(row[2]) < block]
    if late:
        is_late = np.isin(term_ids, np.fromiter(late, dtype=np.int64))
        late_postings = NewPostings(*(np.asarray(c, dtype=np.int64)[is_late] for c in new))
        await _rewrite_late(session, tenant_id, late_postings, table)
        if known is not None:
            known.reread(tenant_id, await _last_blocks(session, tenant_id, sorted(late), table))
        new = NewPostings(*(np.asarray(c, dtype=np.int64)[~is_late] for c in new))
        if not len(new.term_ids):
            return
    rows = block_rows(tenant_id, new, tails, table)
    if known is not None:
        known.record(tenant_id, rows)
    columns, stored = _stored(table, rows)
    await insert_rows(
        session,
        table,
        columns,
        stored,
        order_by='d.term_id, d.first_doc',
        on_conflict='ON CONFLICT (tenant_id, term_id, first_doc) DO UPDATE SET last_doc = excluded.last_doc, '
        f'count = {table}.count + excluded.count, '
        f'postings = CAST({table}.postings || excluded.postings AS {session.dialect.ddl["blob"]})',
    )


def _lowest(term_ids: NDArray[np.int64], doc_ids: NDArray[np.int64], terms: NDArray[np.int64]) -> NDArray[np.int64]:
    """Each of the sorted `terms`' lowest new document."""
    lowest = np.full(len(terms), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(lowest, np.searchsorted(terms, term_ids), doc_ids)
    return lowest


async def _rewrite_late(session: Session, tenant_id: int, new: NewPostings, table: BlockTable) -> None:
    """Merge `new` into their terms' blocks from the one holding each term's lowest new document on:
    those blocks are read, merged with the new postings in document order, and written again full."""
    by_term: dict[int, list[tuple[int, int, int]]] = {}
    for term_id, doc_id, frequency, length in zip(*(np.asarray(c).tolist() for c in new), strict=True):
        by_term.setdefault(term_id, []).append((doc_id, frequency, length))
    ranges = [(term_id, min(doc for doc, _, _ in postings), _LAST_ID) for term_id, postings in by_term.items()]
    old: list[tuple[int, int, int]] = []
    for term_id, first_doc, stored in await _blocks.select_overlapping(session, tenant_id, ranges, table):
        old.append((tenant_id, int(term_id), int(first_doc)))
        by_term[int(term_id)].extend(decode(int(first_doc), bytes(stored)))
    rows: list[tuple[Any, ...]] = []
    block = _blocks.block_size(table)
    for term_id in sorted(by_term):
        postings = sorted(set(by_term[term_id]))
        start = 0
        while start < len(postings):
            first = postings[start][0]
            stop = start + 1
            while stop < len(postings) and stop - start < block and postings[stop][0] - first < _OFFSETS:
                stop += 1
            rows.append(_row(tenant_id, term_id, first, postings[start:stop]))
            start = stop
    await delete_rows(session, table, _COLUMNS[:3], sorted(set(old)))
    await insert_rows(session, table, *_stored(table, rows))


_LAST_ID = 2**63 - 1


async def remove_postings(session: Session, doomed: Sequence[tuple[int, int, int]], table: BlockTable = BLOCKS) -> None:
    """Take documents out of their terms' blocks in `table`: `doomed` holds `(tenant_id, term_id, doc_id)`.

    Each block holding one is read, rewritten without it or deleted if it
    empties. A block keeps its `first_doc` key, which stays below every document it holds.
    """
    by_term: dict[tuple[int, int], set[int]] = {}
    for tenant_id, term_id, doc_id in doomed:
        by_term.setdefault((tenant_id, term_id), set()).add(doc_id)
    updates: list[tuple[Any, ...]] = []
    deletes: list[tuple[int, int, int]] = []
    for tenant_id, group in groupby(sorted(by_term.items()), key=lambda item: item[0][0]):
        gone = dict(group)
        ranges = [(term_id, min(docs), max(docs)) for (_, term_id), docs in gone.items()]
        found: dict[int, dict[int, bytes]] = {}
        for term_id, first_doc, stored in await select_overlapping(session, tenant_id, ranges, table):
            found.setdefault(int(term_id), {})[int(first_doc)] = bytes(stored)
        for term_id, blocks in found.items():
            docs = gone[(tenant_id, term_id)]
            for first_doc, stored in blocks.items():
                postings = decode(first_doc, stored)
                kept = [posting for posting in postings if posting.doc_id not in docs]
                if not kept:
                    deletes.append((tenant_id, term_id, first_doc))
                elif len(kept) < len(postings):
                    updates.append(_row(tenant_id, term_id, first_doc, kept))
    dialect = session.dialect
    await run_batch(
        session,
        f'UPDATE {checked_table(table)} AS b SET last_doc = d.last_doc, count = d.count, '  # noqa: S608
        f'postings = d.postings FROM {dialect.batch(_stored(table, [])[0])} '
        'WHERE b.tenant_id = d.tenant_id AND b.term_id = d.term_id AND b.first_doc = d.first_doc',
        _stored(table, sorted(updates, key=lambda row: row[:3]))[1],
    )
    await delete_rows(session, table, _COLUMNS[:3], sorted(deletes))
