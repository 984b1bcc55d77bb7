"""Posting lists stored in blocks: the layout, its encoding and every read of `posting_blocks`.

More in docs/design/store.md.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain, pairwise, repeat
from operator import itemgetter
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from ..protocol import Posting, PostingColumns
from ..sql._bulk import select_batch
from ..sql._session import Dialect, Row, Session

__all__ = (
    'BLOCK',
    'BLOCKS',
    'DEEP_TIERS',
    'NO_POSTINGS',
    'TIERS',
    'TIER_BLOCK',
    'WORDS',
    'BlockTable',
    'block_size',
    'by_segment',
    'checked_table',
    'columns_of',
    'decode',
    'encode',
    'joined_postings',
    'pending',
    'postings_by_term',
    'read_blocks',
    'read_lookups',
    'read_overlapping',
    'read_tiers',
    'run_starts',
    'segments_in',
    'select_overlapping',
)

BLOCK = 64
"""The most postings one block holds."""

BlockTable = Literal['posting_blocks', 'posting_tiers', 'posting_deep_tiers']
"""A table of blocks: every term's postings, or the tiers of long lists (`postings._tiers`: the top tier,
the deeper one of very long lists), laid out alike."""
BLOCKS: BlockTable = 'posting_blocks'
TIERS: BlockTable = 'posting_tiers'
DEEP_TIERS: BlockTable = 'posting_deep_tiers'


NO_POSTINGS = PostingColumns(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.uint32), np.empty(0, dtype=np.uint32))
"""A term's postings when it has none."""


TIER_BLOCK = 1024
"""The most postings one block of a tier holds. A tier is only ever read whole, so its blocks are large: a
search reading a common word's tier for the first time decodes a few dozen rows instead of a thousand, and
makes that many fewer Python objects, which is what set the collector off in the reads of small blocks
(docs/design/store.md, "Tier blocks"). The blocks of every posting are looked up by document and stay small
(`BLOCK`). Tiers written in smaller blocks stay valid: this is a bound, reached as they are cut again."""


def checked_table(table: BlockTable) -> BlockTable:
    """`table`, refused unless it is a table of blocks: the name goes into SQL text."""
    if table not in (BLOCKS, TIERS, DEEP_TIERS):
        raise ValueError(f'{table!r} is not a table of posting blocks.')
    return table


def block_size(table: BlockTable) -> int:
    """The most postings a block of `table` holds: `BLOCK`, or `TIER_BLOCK` in a table of tiers (read when
    called: tests make both small)."""
    return BLOCK if checked_table(table) == BLOCKS else TIER_BLOCK


_SWAP = sys.byteorder == 'big'
WORDS = np.dtype('<u4')


def _stored(values: array[int]) -> bytes:
    if _SWAP:
        values.byteswap()
    return values.tobytes()


def encode(first_doc: int, doc_ids: Sequence[int], frequencies: Sequence[int], lengths: Sequence[int]) -> bytes:
    """The stored form of postings (ascending `doc_ids`) in the block at `first_doc`; built at C speed."""
    offsets = map(int.__sub__, doc_ids, repeat(first_doc))
    return _stored(array('I', chain.from_iterable(zip(offsets, frequencies, lengths, strict=True))))


def _integers(stored: bytes) -> array[int]:
    values = array('I')
    values.frombytes(stored)
    if _SWAP:
        values.byteswap()
    return values


def decode(first_doc: int, stored: bytes) -> list[Posting]:
    """A block's postings, in `doc_id` order."""
    values = _integers(stored)
    return _postings(map(int.__add__, repeat(first_doc), values[0::3]), values[1::3], values[2::3])


def _postings(doc_ids: Iterable[int], frequencies: Iterable[int], lengths: Iterable[int]) -> list[Posting]:
    # `tuple.__new__` builds each one in C; `Posting._make` would be a Python call per posting.
    return list(map(tuple.__new__, repeat(Posting), zip(doc_ids, frequencies, lengths, strict=True)))


def run_starts(*keys: NDArray[np.int64]) -> NDArray[np.intp]:
    """Where each run of equal consecutive `keys` begins (all of them equal to the previous row's)."""
    changed = np.empty(len(keys[0]), dtype=bool)
    changed[:1] = True
    changed[1:] = keys[0][1:] != keys[0][:-1]
    for key in keys[1:]:
        changed[1:] |= key[1:] != key[:-1]
    return np.flatnonzero(changed)


_OVERLAPPING = (
    'SELECT d.term_id, b.first_doc, b.postings FROM {batch} {join} {table} b '
    'ON b.tenant_id = d.tenant_id AND b.term_id = d.term_id AND b.first_doc <= d.high AND b.first_doc >= '
    'coalesce((SELECT max(x.first_doc) FROM {table} x '
    'WHERE x.tenant_id = d.tenant_id AND x.term_id = d.term_id AND x.first_doc <= d.low), d.low)'
)
"""Each batch row's blocks that can hold a document in `[low, high]`: from the block holding `low` on."""


async def select_overlapping(
    session: Session, tenant_id: int, ranges: Sequence[tuple[int, int, int]], table: BlockTable = BLOCKS
) -> list[Row]:
    columns = (('tenant_id', 'bigint'), ('term_id', 'bigint'), ('low', 'bigint'), ('high', 'bigint'))
    dialect = session.dialect
    return await select_batch(
        session,
        _OVERLAPPING.format(batch=dialect.batch(columns), join=dialect.join_in_order, table=checked_table(table)),
        [(tenant_id, *key) for key in ranges],
    )


def by_segment(
    dialect: Dialect,
    segments: str,
    where: str = '',
    columns: str = 'p.term_id, p.first_doc, p.postings',
    *,
    tenant: str = '$1',
) -> str:
    """`SELECT columns` of the tenant's (`tenant`, an expression: `$1` unless given) `pending_postings p`
    rows in each segment of `segments`, a table expression naming its segment column `s.segment`, found by
    one index probe of `(tenant, segment)` (and the equalities in `where`) per segment.

    Why driven from the segments: every merge deletes the rows writes added, so what statistics say of
    the table is whatever it held when it was last analysed. Analysed while empty, PostgreSQL believes it
    empty and took `tenant_id` alone as the index condition, stepping over every row the tenant's merges
    left dead: 268 ms for a rare id's pending read at 200,000 messages, and 376 ms for a merge's sizes,
    against 0.4 ms probing by segment (docs/design/store.md, "Pending rows by segment"). A `LATERAL`
    probe of the segment's key (`OFFSET 0` keeps it a probe) leaves the planner no other plan; SQLite's
    joins in order do the same."""
    probe = f'p.tenant_id = {tenant} AND p.segment = s.segment{where}'
    if dialect.supports_join_planning:
        rows = f'CROSS JOIN LATERAL (SELECT * FROM pending_postings p WHERE {probe} OFFSET 0) p'  # noqa: S608
    else:
        rows = f'{dialect.join_in_order} pending_postings p ON {probe}'
    return f'SELECT {columns} FROM {segments} {rows}'  # noqa: S608 (constant SQL fragments only)


def segments_in(dialect: Dialect, param: int) -> str:
    """Array parameter `$param` as a table expression of segments `s.segment` (for `by_segment`)."""
    return f'(SELECT value AS segment FROM {dialect.each(param, "bigint")}) s'  # noqa: S608 (no value)


def pending(dialect: Dialect, terms: int = 2, extra: str = '') -> str:
    """The tenant's (`$1`) segment rows (`postings._segments`) of the distinct terms of array parameter
    `$terms`, shaped as block rows (with the `extra` columns): an index probe per segment and term."""
    return (
        by_segment(
            dialect,
            f'index_segments s CROSS JOIN {dialect.each(terms, "bigint")}',  # Its order, on SQLite.
            ' AND p.term_id = value',
            f'p.term_id, p.first_doc, p.postings{extra}',
        )
        + ' WHERE s.tenant_id = $1'
    )


_HOLDING_LATERAL = (
    'CROSS JOIN LATERAL (SELECT x.term_id, x.first_doc, x.postings FROM posting_blocks x WHERE x.tenant_id = $1 '
    'AND x.term_id = ${term} AND x.first_doc <= value ORDER BY x.first_doc DESC LIMIT 1) b'
)
"""The block holding a document, where the planner probes with `LATERAL`: one backward descent of the key."""

_HOLDING_JOINED = (
    'posting_blocks b ON b.tenant_id = $1 AND b.term_id = ${term} AND b.first_doc = (SELECT max(x.first_doc) '
    'FROM posting_blocks x WHERE x.tenant_id = $1 AND x.term_id = ${term} AND x.first_doc <= value)'
)
"""The block holding a document, joined: the last one starting at or before it, by its key."""


async def read_lookups(
    session: Session, tenant_id: int, wanted: Mapping[int, NDArray[np.int64]]
) -> dict[int, PostingColumns]:
    """`term_id -> postings` of the `wanted` documents (ascending, per term) that each term's blocks hold,
    without the pending rows, in one statement: a pruned search's lookups, a thousand documents or more.

    A part per term, its documents bound as one array: the term is a parameter, not a column of each row,
    so SQLite reads no JSON row per document, and each document finds its block by key equality instead
    of a range scan. On SQLite that halved the statement's time per document (docs/design/store.md,
    "Lookups by document, term by term"). Two documents of one block read it twice; it is decoded once."""
    terms = [(term_id, doc_ids) for term_id, doc_ids in wanted.items() if len(doc_ids)]
    if not terms:
        return {}
    dialect = session.dialect
    parts: list[str] = []
    params: list[object] = [tenant_id]
    for term_id, doc_ids in terms:
        params += [term_id, dialect.array(doc_ids.tolist())]
        term, documents = len(params) - 1, len(params)
        holding = (
            _HOLDING_LATERAL.format(term=term)
            if dialect.supports_join_planning
            else f'{dialect.join_in_order} {_HOLDING_JOINED.format(term=term)}'
        )
        each = dialect.each(documents, 'bigint')
        parts.append(f'SELECT b.term_id, b.first_doc, b.postings FROM {each} {holding}')  # noqa: S608 (no value)
    found = columns_of(await session.rows(' UNION ALL '.join(parts), *params), blocks_once=True)
    for term_id, doc_ids in terms:
        if (columns := found.get(term_id)) is not None:  # The blocks' other documents left out, by binary search.
            at = np.minimum(np.searchsorted(columns.doc_ids, doc_ids), len(columns.doc_ids) - 1)
            at = at[columns.doc_ids[at] == doc_ids]
            found[term_id] = PostingColumns(columns.doc_ids[at], columns.term_frequencies[at], columns.lengths[at])
    return found


async def read_overlapping(
    session: Session, tenant_id: int, ranges: Sequence[tuple[int, int, int]]
) -> dict[int, PostingColumns]:
    """`term_id -> postings` of the blocks that can hold documents in each `(term_id, low, high)` range,
    by key lookups (the cost follows the ranges, not the lists), with the terms' pending rows."""
    if not ranges:
        return {}
    dialect = session.dialect
    # The segments first: a merge committing between the two reads moves postings into blocks read
    # after it, so they are read twice (kept once by `columns_of`), never missed.
    terms = dialect.array(sorted({term_id for term_id, _, _ in ranges}))
    rows = await session.rows(pending(dialect), tenant_id, terms)
    rows += await select_overlapping(session, tenant_id, ranges)
    return columns_of(rows)


async def read_blocks(
    session: Session, tenant_id: int, term_ids: Sequence[int], table: BlockTable = BLOCKS, *, with_pending: bool = True
) -> dict[int, PostingColumns]:
    """`term_id -> postings` of every block of `term_ids` in `table` (one range scan per term) and, with
    `with_pending`, their pending rows."""
    if not term_ids:
        return {}
    dialect = session.dialect
    blocks = (
        f'SELECT b.term_id, b.first_doc, b.postings FROM {dialect.each(2, "bigint")} '  # noqa: S608
        f'{dialect.join_in_order} {checked_table(table)} b ON b.tenant_id = $1 AND b.term_id = value'
    )
    if with_pending:
        blocks = f'{blocks} UNION ALL {pending(dialect)}'
    return columns_of(await session.rows(blocks, tenant_id, dialect.array(sorted(set(term_ids)))))


async def read_tiers(
    session: Session, tenant_id: int, table: BlockTable, tier_terms: Sequence[int], pending_terms: Sequence[int]
) -> tuple[dict[int, PostingColumns], dict[int, PostingColumns]]:
    """`term_id -> postings` of every block of `tier_terms` in `table` (a table of tiers), and apart from
    them the pending rows of `pending_terms`, in one statement: a search keeps the tiers it read
    (`index._tier_cache`), never the pending postings, which change without the tier."""
    if not tier_terms and not pending_terms:
        return {}, {}
    dialect = session.dialect
    rows = await session.rows(
        f'SELECT b.term_id, b.first_doc, b.postings, 0 FROM {dialect.each(2, "bigint")} '  # noqa: S608
        f'{dialect.join_in_order} {checked_table(table)} b ON b.tenant_id = $1 AND b.term_id = value '
        f'UNION ALL {pending(dialect, 3, ", 1")}',
        tenant_id,
        dialect.array(sorted(set(tier_terms))),
        dialect.array(sorted(set(pending_terms))),
    )
    return columns_of([row for row in rows if not row[3]]), columns_of([row for row in rows if row[3]])


def joined_postings(base: PostingColumns, extra: PostingColumns | None) -> PostingColumns:
    """The postings of both (each ascending), ascending, each document once (`base`'s where both hold it: a
    merge committing during a read without a snapshot can show a posting as pending and in a tier). `extra`
    is the few (pending postings, a round of lookups): each goes in where a binary search puts it, one pass
    over `base`, where sorting both would cost a sort of `base` per term of every search."""
    if extra is None or not len(extra.doc_ids):
        return base
    at = np.searchsorted(base.doc_ids, extra.doc_ids)
    known = at < len(base.doc_ids)
    known[known] = base.doc_ids[at[known]] == extra.doc_ids[known]
    fresh, at = ~known, at[~known]
    return PostingColumns(
        np.insert(base.doc_ids, at, extra.doc_ids[fresh]),
        np.insert(base.term_frequencies, at, extra.term_frequencies[fresh]),
        np.insert(base.lengths, at, extra.lengths[fresh]),
    )


def _split_rows(rows: Sequence[Row]) -> tuple[NDArray[np.int64], NDArray[np.int64], list[bytes]]:
    """Block rows `(term_id, first_doc, postings)` as three columns. Column by column: `zip(*rows)`
    passes every row as an argument of one call, which is slower for a merge's many rows."""
    count = len(rows)
    terms = np.fromiter(map(itemgetter(0), rows), dtype=np.int64, count=count)
    firsts = np.fromiter(map(itemgetter(1), rows), dtype=np.int64, count=count)
    return terms, firsts, list(map(itemgetter(2), rows))


def postings_by_term(rows: Sequence[Row]) -> tuple[NDArray[np.int64], ...]:
    """Block rows `(term_id, first_doc, postings)` as four aligned columns (term ids, document ids,
    frequencies, lengths) grouped by term, each term's documents ascending: decoded in one pass over
    all rows, for a merge's hundred thousand rows and more (`columns_of` decodes term by term, a
    Python step per term)."""
    terms, firsts, stored = _split_rows(rows)
    counts = np.fromiter(map(len, stored), dtype=np.int64, count=len(stored)) // 12
    values = np.frombuffer(b''.join(stored), dtype=WORDS).reshape(-1, 3).astype(np.int64)
    term_ids = np.repeat(terms, counts)
    doc_ids = values[:, 0] + np.repeat(firsts, counts)
    order = np.lexsort((doc_ids, term_ids))
    return term_ids[order], doc_ids[order], values[order, 1], values[order, 2]


def columns_of(rows: Sequence[Row], *, blocks_once: bool = False) -> dict[int, PostingColumns]:
    """`(term_id, first_doc, postings)` block rows as each term's postings, decoded as arrays in one pass.

    A scope-wide read of a common term is a thousand blocks or more, so nothing here is a Python step
    per block or per posting beyond the rows themselves. The rows are put in key order first:
    PostgreSQL returns them in the order its plan finds them. A term whose documents then do not
    ascend (overlapping ranges read a block twice; a segment row lies among the blocks) is put in
    document order, each document once. With `blocks_once` (rows of one table of blocks, whose key is
    the term and the first document) a row read twice is dropped before decoding instead.
    """
    if not rows:
        return {}
    terms, firsts, stored = _split_rows(rows)
    if len(rows) > 1:
        order = np.lexsort((firsts, terms))
        terms, firsts = terms[order], firsts[order]
        if blocks_once:  # Rows of one table of blocks, keyed by (term, first document): the same row twice.
            once = run_starts(terms, firsts)
            order, terms, firsts = order[once], terms[once], firsts[once]
        stored = [stored[index] for index in order.tolist()]
    counts = np.fromiter(map(len, stored), dtype=np.int64, count=len(stored)) // 12
    bounds = [*run_starts(terms).tolist(), len(stored)]
    found: dict[int, PostingColumns] = {}
    for start, end in pairwise(bounds):  # Term by term: each pass stays in the CPU cache.
        values = np.frombuffer(b''.join(stored[start:end]), dtype=WORDS).reshape(-1, 3)
        doc_ids = values[:, 0] + np.repeat(firsts[start:end], counts[start:end])
        frequencies, lengths = values[:, 1], values[:, 2]
        if len(doc_ids) > 1 and not bool(np.all(doc_ids[1:] > doc_ids[:-1])):
            doc_ids, once = np.unique(doc_ids, return_index=True)
            frequencies, lengths = frequencies[once], lengths[once]
        found[int(terms[start])] = PostingColumns(doc_ids, frequencies, lengths)
    return found
