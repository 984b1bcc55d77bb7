"""Posting lists stored in blocks: the layout, and every read and write of `posting_blocks`, on any backend.

A term's posting list in one tenant is a run of blocks keyed `(tenant_id, term_id, first_doc)`, each
holding up to `BLOCK` postings of consecutive documents. A tenant's documents get ascending ids (one
writer per tenant at a time, see `_index`), so a write only ever adds postings after the last block
of each term: it appends to that term's tail block until the block is full, then opens the next.
That is the amortised, bounded merge of this layout: every block is written at most `BLOCK` times,
each time in the transaction that adds its postings, so a failed write leaves neither the entries
nor their postings, and there is nothing to merge later. Deleting a document rewrites the blocks of
its terms that hold it.

Each block records its document range, its count and its front: its postings' highest term
frequency and shortest length, one `(frequency, length)` pair that no posting of the block beats on
either (tantivy keeps the same bound per block). BM25 weight grows with frequency and falls with
length for every `k1`, `b` and average length, so the pair's weight is an upper bound of the
block's, for an exact top-k that skips blocks. A write merges it with the new postings by a maximum
and a minimum, without reading the block's postings. Stores written by version 7 hold
the exact Pareto front instead (several pairs); both bound every posting, and a write replaces
either with one pair. (Today's scope-wide search scores whole lists as arrays instead, see
`search._plan._rank_columns`: on real text almost every block of a common term can reach the
page.) A conversation's search reads only the blocks overlapping its documents' id ranges.

The encoding: a block's postings are one array of unsigned 32-bit little-endian integers,
`(doc_id - first_doc, term_frequency, length)` per posting, 12 bytes. Appending is then
concatenation, which both databases do inside the upsert (a write reads only the tail's count and
front, so it costs one key lookup and one row write per term), and decoding is `array.frombytes` or
`numpy.frombuffer` at C speed. A variable-length or compressed encoding would be smaller but needs a
read-modify-write of the tail block on every write and Python-speed decoding on every search, which
is where the time goes.

`BLOCK` = 64, by measurement (`scripts/bench_search.py --messages 10000`, SQLite): a block of 64
postings is a row of about 850 bytes, inside the largest row SQLite keeps in a `WITHOUT ROWID` page
(about 1,000 bytes at 4 KiB pages). Blocks of 128 spilled every full block's tail into an overflow
page of its own: the table was 57% unused space and the store 7,040 bytes per message, against
5,583 with 64 (and writes 14% faster).
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Iterable, Sequence
from itertools import chain, groupby, pairwise, repeat
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from ._bulk import CHUNK, delete_rows, insert_rows, run_batch, select_batch
from ._protocol import Posting, PostingColumns
from ._session import Row, Session

__all__ = (
    'BLOCK',
    'SMALL_WRITE',
    'NewPostings',
    'add_postings',
    'columns_of',
    'decode',
    'decode_front',
    'encode',
    'postings_of',
    'read_blocks',
    'read_overlapping',
    'remove_postings',
)

BLOCK = 64
"""The most postings one block holds."""

_OFFSETS = 1 << 32
"""A block's documents lie less than this above its `first_doc` (the offset is 32 bits)."""

_SWAP = sys.byteorder == 'big'
_WORDS = np.dtype('<u4')
_PAIR = struct.Struct('<2I')


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


def decode_front(stored: bytes) -> list[tuple[int, int]]:
    values = _integers(stored)
    return list(zip(values[0::2], values[1::2], strict=True))


def decode(first_doc: int, stored: bytes) -> list[Posting]:
    """A block's postings, in `doc_id` order."""
    values = _integers(stored)
    return _postings(map(int.__add__, repeat(first_doc), values[0::3]), values[1::3], values[2::3])


def postings_of(columns: PostingColumns) -> list[Posting]:
    """Columns as `Posting` tuples, in their order."""
    return _postings(*(column.tolist() for column in columns))


def _postings(doc_ids: Iterable[int], frequencies: Iterable[int], lengths: Iterable[int]) -> list[Posting]:
    # `tuple.__new__` builds each one in C; `Posting._make` would be a Python call per posting.
    return list(map(tuple.__new__, repeat(Posting), zip(doc_ids, frequencies, lengths, strict=True)))


_COLUMNS = (
    ('tenant_id', 'bigint'),
    ('term_id', 'bigint'),
    ('first_doc', 'bigint'),
    ('last_doc', 'bigint'),
    ('count', 'int'),
    ('front', 'bytea'),
    ('postings', 'bytea'),
)


def _row(
    tenant_id: int,
    term_id: int,
    first_doc: int,
    postings: Sequence[tuple[int, int, int]],
    held: Sequence[tuple[int, int]] = (),
) -> tuple[Any, ...]:
    """A block's row holding `postings` (`(doc_id, term_frequency, length)`), its front also bounding `held`."""
    doc_ids, frequencies, lengths = zip(*postings, strict=True)
    top = max(chain(frequencies, (pair[0] for pair in held)))
    shortest = min(chain(lengths, (pair[1] for pair in held)))
    front = _PAIR.pack(top, shortest)
    return (
        tenant_id,
        term_id,
        first_doc,
        doc_ids[-1],
        len(doc_ids),
        front,
        encode(first_doc, doc_ids, frequencies, lengths),
    )


class NewPostings(NamedTuple):
    """The postings a write adds: one per index of four aligned columns, `doc_ids` ascending."""

    term_ids: Sequence[int]
    doc_ids: Sequence[int]
    frequencies: Sequence[int]
    lengths: Sequence[int]


SMALL_WRITE = 256
"""Up to this many postings, a write places them in Python (`_rows_in_python`); more, as arrays
(`_rows_as_arrays`). Measured without the database: 20 vs 82 µs for 24 postings, 170 vs 159 µs for
200, 4.5 vs 0.9 ms for 10,000. Most writes are a step's few messages; imports and rebuilds are large."""


async def _open_tails(session: Session, tenant_id: int, term_ids: Sequence[int]) -> list[Row]:
    """`(term_id, first_doc, count, front)` of each term's last block where it still has room, by term.

    One index probe per term, whatever the tenant's size. A planner that chooses joins itself is
    given a `LATERAL` probe to run: joined instead, PostgreSQL hashed every block of the tenant on
    each write whenever its statistics lagged the table's growth (5 ms for a 2-message append into a
    tenant of 13,000 blocks, growing with the tenant).
    """
    dialect = session.dialect
    if dialect.plans_joins:
        sql = (
            f'SELECT value, b.first_doc, b.count, b.front FROM {dialect.each(2, "bigint")} CROSS JOIN LATERAL '  # noqa: S608
            '(SELECT x.first_doc, x.count, x.front FROM posting_blocks x WHERE x.tenant_id = $1 AND x.term_id = value '
            'ORDER BY x.first_doc DESC LIMIT 1) AS b WHERE b.count < $3 ORDER BY value'
        )
    else:
        sql = (
            f'SELECT value, b.first_doc, b.count, b.front FROM {dialect.each(2, "bigint")} '  # noqa: S608
            f'{dialect.join_in_order} posting_blocks b ON b.tenant_id = $1 AND b.term_id = value '
            'AND b.first_doc = (SELECT max(x.first_doc) FROM posting_blocks x '
            'WHERE x.tenant_id = $1 AND x.term_id = value) WHERE b.count < $3 ORDER BY value'
        )
    tails: list[Row] = []
    for start in range(0, len(term_ids), CHUNK):
        tails += await session.rows(sql, tenant_id, dialect.array(term_ids[start : start + CHUNK]), BLOCK)
    return tails


def _run_starts(*keys: NDArray[np.int64]) -> NDArray[np.intp]:
    """Where each run of equal consecutive `keys` begins (all of them equal to the previous row's)."""
    changed = np.empty(len(keys[0]), dtype=bool)
    changed[:1] = True
    changed[1:] = keys[0][1:] != keys[0][:-1]
    for key in keys[1:]:
        changed[1:] |= key[1:] != key[:-1]
    return np.flatnonzero(changed)


def _held(tails: Sequence[Row]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Each tail's highest frequency and shortest length, from its stored front (of one pair or more)."""
    fronts = [bytes(tail[3]) for tail in tails]
    pairs = np.frombuffer(b''.join(fronts), dtype=_WORDS).reshape(-1, 2).astype(np.int64)
    starts = np.cumsum([0] + [len(stored) // 8 for stored in fronts[:-1]])
    return np.maximum.reduceat(pairs[:, 0], starts), np.minimum.reduceat(pairs[:, 1], starts)


def _rows_in_python(tenant_id: int, new: NewPostings, tails: Sequence[Row]) -> list[tuple[Any, ...]]:
    """The block rows for a small write (`SMALL_WRITE`), given its terms' open `tails`."""
    open_tails = {int(tail[0]): (int(tail[1]), int(tail[2]), decode_front(bytes(tail[3]))) for tail in tails}
    by_term: dict[int, list[tuple[int, int, int]]] = {}
    for term_id, posting in zip(new.term_ids, zip(new.doc_ids, new.frequencies, new.lengths, strict=True), strict=True):
        by_term.setdefault(term_id, []).append(posting)
    rows: list[tuple[Any, ...]] = []
    for term_id in sorted(by_term):
        postings, start = by_term[term_id], 0
        tail = open_tails.get(term_id)
        if tail is not None and postings[-1][0] - tail[0] < _OFFSETS:
            start = min(BLOCK - tail[1], len(postings))
            rows.append(_row(tenant_id, term_id, tail[0], postings[:start], tail[2]))
        rows += (
            _row(tenant_id, term_id, postings[at][0], postings[at : at + BLOCK])
            for at in range(start, len(postings), BLOCK)
        )
    return rows


def _rows_as_arrays(tenant_id: int, new: NewPostings, tails: Sequence[Row]) -> list[tuple[Any, ...]]:
    """The block rows for a large write, given its terms' open `tails`: `_rows_in_python`'s, worked out
    with numpy (a hundred messages add some ten thousand postings to a few thousand blocks)."""
    count = len(new.term_ids)
    order = np.argsort(np.asarray(new.term_ids, dtype=np.int64), kind='stable')  # Each term's documents ascending.
    terms, docs, frequencies, lengths = (np.asarray(column, dtype=np.int64)[order] for column in new)
    firsts_of_terms = _run_starts(terms)
    per_term = np.diff(firsts_of_terms, append=count)
    room, tail_first, held_top, held_shortest = (np.zeros(len(per_term), dtype=np.int64) for _ in range(4))
    if tails:  # The tails are of the write's own terms (`_open_tails` reads no other).
        tail_terms, tail_firsts, tail_counts = np.array([tail[:3] for tail in tails], dtype=np.int64).T
        at = np.searchsorted(terms[firsts_of_terms], tail_terms)
        fits = docs[firsts_of_terms + per_term - 1][at] - tail_firsts < _OFFSETS
        room[at[fits]] = BLOCK - tail_counts[fits]
        tail_first[at] = tail_firsts
        held_top[at], held_shortest[at] = _held(tails)
    # A term's postings fill its tail's room, then blocks of BLOCK: block -1 is the tail.
    rank = np.arange(count) - np.repeat(firsts_of_terms, per_term)
    room_of = np.repeat(room, per_term)
    block = np.where(rank < room_of, -1, (rank - room_of) // BLOCK)
    starts = _run_starts(terms, block)
    sizes = np.diff(starts, append=count)
    owner = np.searchsorted(firsts_of_terms, starts, side='right') - 1  # Each block's term.
    on_tail = block[starts] < 0
    first_docs = np.where(on_tail, tail_first[owner], docs[starts])
    top = np.maximum(np.maximum.reduceat(frequencies, starts), np.where(on_tail, held_top[owner], 0))
    shortest = np.minimum.reduceat(lengths, starts)
    shortest[on_tail] = np.minimum(shortest[on_tail], held_shortest[owner[on_tail]])
    encoded = np.empty((count, 3), dtype=_WORDS)
    encoded[:, 0] = docs - np.repeat(first_docs, sizes)
    encoded[:, 1], encoded[:, 2] = frequencies, lengths
    stored = encoded.tobytes()
    fronts = np.stack([top, shortest], axis=1).astype(_WORDS).tobytes()
    ends = (starts + sizes) * 12
    return [
        (tenant_id, term_id, first_doc, last_doc, size, fronts[8 * index : 8 * index + 8], stored[start * 12 : end])
        for index, (term_id, first_doc, last_doc, size, start, end) in enumerate(
            zip(
                terms[starts].tolist(),
                first_docs.tolist(),
                docs[starts + sizes - 1].tolist(),
                sizes.tolist(),
                starts.tolist(),
                ends.tolist(),
                strict=True,
            )
        )
    ]


async def add_postings(session: Session, tenant_id: int, new: NewPostings) -> None:
    """Append `new` (postings of documents newer than any of the tenant's indexed ones) to their terms' blocks.

    One read of the terms' open tail blocks, then one upsert per block touched, in term order (the
    lock order every writer takes, so two writers cannot deadlock): a tail grows by concatenation in
    the database, new blocks are inserted. A term's new postings fill its tail's room, then blocks of
    `BLOCK`; a tail too far below them for 32-bit offsets is left as it is.
    """
    count = len(new.term_ids)
    if not count:
        return
    if new.doc_ids[-1] - new.doc_ids[0] >= _OFFSETS or max(max(new.frequencies), max(new.lengths)) >= _OFFSETS:
        raise ValueError('Postings need documents less than 2**32 ids apart in one write, and counts under 2**32.')
    tails = await _open_tails(session, tenant_id, sorted(set(new.term_ids)))
    rows = (_rows_in_python if count <= SMALL_WRITE else _rows_as_arrays)(tenant_id, new, tails)
    await insert_rows(
        session,
        'posting_blocks',
        _COLUMNS,
        rows,
        order_by='d.term_id, d.first_doc',
        on_conflict='ON CONFLICT (tenant_id, term_id, first_doc) DO UPDATE SET last_doc = excluded.last_doc, '
        'count = posting_blocks.count + excluded.count, front = excluded.front, '
        f'postings = CAST(posting_blocks.postings || excluded.postings AS {session.dialect.blob})',
    )


_OVERLAPPING = (
    'SELECT d.term_id, b.first_doc, b.postings FROM {batch} {join} posting_blocks b '
    'ON b.tenant_id = d.tenant_id AND b.term_id = d.term_id AND b.first_doc <= d.high AND b.first_doc >= '
    'coalesce((SELECT max(x.first_doc) FROM posting_blocks x '
    'WHERE x.tenant_id = d.tenant_id AND x.term_id = d.term_id AND x.first_doc <= d.low), d.low)'
)
"""Each batch row's blocks that can hold a document in `[low, high]`: from the block holding `low` on."""


async def _select_overlapping(session: Session, tenant_id: int, ranges: Sequence[tuple[int, int, int]]) -> list[Row]:
    columns = (('tenant_id', 'bigint'), ('term_id', 'bigint'), ('low', 'bigint'), ('high', 'bigint'))
    dialect = session.dialect
    return await select_batch(
        session,
        _OVERLAPPING.format(batch=dialect.batch(columns), join=dialect.join_in_order),
        [(tenant_id, *key) for key in ranges],
    )


async def read_overlapping(
    session: Session, tenant_id: int, ranges: Sequence[tuple[int, int, int]]
) -> dict[int, PostingColumns]:
    """`term_id -> postings` of the blocks that can hold documents in each `(term_id, low, high)` range,
    by key lookups (the cost follows the ranges, not the lists)."""
    return columns_of(await _select_overlapping(session, tenant_id, ranges))


async def read_blocks(session: Session, tenant_id: int, term_ids: Sequence[int]) -> dict[int, PostingColumns]:
    """`term_id -> postings` of every block of `term_ids` (one range scan per term)."""
    dialect = session.dialect
    rows = await session.rows(
        f'SELECT b.term_id, b.first_doc, b.postings FROM {dialect.each(2, "bigint")} {dialect.join_in_order} '  # noqa: S608
        'posting_blocks b ON b.tenant_id = $1 AND b.term_id = value',
        tenant_id,
        dialect.array(sorted(set(term_ids))),
    )
    return columns_of(rows)


def columns_of(rows: Sequence[Row]) -> dict[int, PostingColumns]:
    """`(term_id, first_doc, postings)` block rows as each term's postings, decoded as arrays in one pass.

    A scope-wide read of a common term is a thousand blocks or more, so nothing here is a Python step
    per block or per posting beyond the rows themselves. The rows are put in key order first, once
    each: PostgreSQL returns them in the order its plan finds them, and overlapping ranges can read a
    block twice.
    """
    if not rows:
        return {}
    term_column, first_column, stored = zip(*rows, strict=True)
    terms = np.array(term_column, dtype=np.int64)
    firsts = np.array(first_column, dtype=np.int64)
    if len(rows) > 1:
        order = np.lexsort((firsts, terms))
        once = _run_starts(terms[order], firsts[order])  # A block read twice is kept once.
        order = order[once]
        terms, firsts = terms[order], firsts[order]
        stored = [stored[index] for index in order.tolist()]
    counts = np.fromiter(map(len, stored), dtype=np.int64, count=len(stored)) // 12
    bounds = [*_run_starts(terms).tolist(), len(stored)]
    found: dict[int, PostingColumns] = {}
    for start, end in pairwise(bounds):  # Term by term: each pass stays in the CPU cache.
        values = np.frombuffer(b''.join(stored[start:end]), dtype=_WORDS).reshape(-1, 3)
        doc_ids = values[:, 0] + np.repeat(firsts[start:end], counts[start:end])
        found[int(terms[start])] = PostingColumns(doc_ids, values[:, 1], values[:, 2])
    return found


async def remove_postings(session: Session, doomed: Sequence[tuple[int, int, int]]) -> None:
    """Take documents out of their terms' blocks: `doomed` holds `(tenant_id, term_id, doc_id)`.

    Each block holding one is read, rewritten without it (its front recomputed) or deleted if it
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
        for term_id, first_doc, stored in await _select_overlapping(session, tenant_id, ranges):
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
        f'UPDATE posting_blocks AS b SET last_doc = d.last_doc, count = d.count, front = d.front, '  # noqa: S608
        f'postings = d.postings FROM {dialect.batch(_COLUMNS)} '
        'WHERE b.tenant_id = d.tenant_id AND b.term_id = d.term_id AND b.first_doc = d.first_doc',
        sorted(updates, key=lambda row: row[:3]),
    )
    await delete_rows(session, 'posting_blocks', _COLUMNS[:3], sorted(deletes))
