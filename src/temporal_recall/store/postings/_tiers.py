"""The top tier of each long posting list: the postings of highest weight kept apart, so that a
scope-wide search can prove its page from the tiers and a few lookups instead of reading every posting.
More in docs/design/store.md ("Top tiers").

A term's tier is chosen by a weight cut fixed per term: a posting is in it exactly when its reference
weight (`reference_weights`: BM25's term-frequency factor with the customary `k1`, `b` and a reference
length recorded when the tier was made) reaches the cut. So a write only appends to a tier (what a new
posting's weight is does not depend on any other posting), and the rule the check verifies is local.
The reference length is the tenant's average document length when the tier is made, the one searches
divide by, so the cut orders a list nearly as searches weigh it.

What stays below the cut is bounded by its non-dominated (term frequency, least length) pairs, the
`frontier`: BM25 weighs a posting more the more often the term occurs and the shorter the document is,
for any `k1 >= 0` and `b` in [0, 1], so the best pair gives every posting below the cut an upper bound
under the search's own parameters and statistics. Removing a posting only lowers what lies below the
cut, so a frontier left as it was stays a bound; only the tier itself must lose it.

A very long list keeps a second, deeper tier the same way (`DEEP`: its own tables, cut and frontier),
so a search whose top tiers leave its page in doubt reads further down the lists it needs instead of
every posting. Each depth is a `Level`; every rule below is written once and applied per level.

Tiers are kept by whoever writes blocks (merges, the bulk path, deletes), in the same transaction,
and the callers keep the tenant's other block writers out, as they do for the blocks themselves.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..protocol import PostingColumns
from ..sql._bulk import CHUNK, insert_rows, run_batch
from ..sql._session import Session
from ._blocks import BLOCKS, DEEP_TIERS, NO_POSTINGS, TIERS, BlockTable, checked_table, read_blocks
from ._writes import NewPostings, append_to_blocks
from ._writes import remove_postings as remove_from_blocks

__all__ = (
    'DEEP',
    'DEEP_LONG',
    'DEEP_TIER',
    'LEVELS',
    'LONG',
    'REFERENCE_B',
    'REFERENCE_K1',
    'REGROW',
    'TIER',
    'TOP',
    'Level',
    'TierState',
    'create_tiers',
    'cut_of',
    'follow_added',
    'follow_removed',
    'frontier_of',
    'new_version',
    'reference_weights',
    'tier_states',
)

TIER = 32_768
"""The postings a cut keeps in a tier (more when the weight at the cut is shared). Chosen by measurement
at a million messages against half and twice as deep (docs/design/store.md, "Top tiers"): shallower
tiers leave most three-word queries unproven, deeper ones cost every proven query more to read."""

LONG = 4 * TIER
"""A list this long or longer gets a tier at the next write that adds to it; shorter lists are read whole."""

REGROW = 2
"""A tier is cut again once it holds this many times what its last cut kept (its list grew meanwhile)."""

DEEP_TIER = 2 * TIER
"""The postings a deeper tier's cut keeps. At a million messages (docs/design/store.md, "Deeper tiers") the top
tiers of four common words leave tens of thousands of documents in doubt; read down to twice as deep, the
lists leave a few thousand against the first threshold, which two or three rounds of lookups settle."""

DEEP_LONG = 4 * DEEP_TIER
"""A list this long or longer gets a deeper tier too."""


_STATE_TABLES = ('term_tiers', 'term_deep_tiers')


@dataclass(frozen=True)
class Level:
    """One depth of tiers: the tables its postings and its terms' states are kept in, and its sizes."""

    postings: BlockTable
    states: str
    deep: bool

    def __post_init__(self) -> None:  # Both names go into SQL text.
        checked_table(self.postings)
        if self.states not in _STATE_TABLES:
            raise ValueError(f'{self.states!r} is not a table of tier states.')

    @property
    def size(self) -> int:
        """The postings a cut keeps (`TIER` or `DEEP_TIER`, read when used: tests make them small)."""
        return DEEP_TIER if self.deep else TIER

    @property
    def long(self) -> int:
        """The list length from which a list gets a tier of this level."""
        return DEEP_LONG if self.deep else LONG


TOP = Level(TIERS, 'term_tiers', deep=False)
DEEP = Level(DEEP_TIERS, 'term_deep_tiers', deep=True)
LEVELS = (TOP, DEEP)
"""Every level, top first."""

REFERENCE_K1 = 1.5
REFERENCE_B = 0.75
"""The BM25 parameters of the reference weight that orders a list for its cut (the search's defaults).
A search with others is still exact: the frontier bounds what lies below the cut under any parameters."""

_PAIRS = np.dtype('<u4')


@dataclass(frozen=True)
class TierState:
    """A `term_tiers` row: how a term's tier is chosen, and the bound on what lies below it."""

    term_id: int
    cut: float
    reference_length: float
    tier_postings: int
    """The postings the tier holds, counted as writes add them (deletes do not lower it): an upper bound."""
    cut_postings: int
    """The postings the last cut kept."""
    frontier: NDArray[np.uint32]
    version: int = 0
    """Changed (`new_version`) in the transaction of every write that changes the tier's postings: the same
    version, read twice, means the same postings (`index._tier_cache`)."""


def new_version() -> int:
    """A tier's next version: random rather than counted, so a tier made anew (a rebuild, a reindex that
    numbers terms afresh) never repeats a version another tier of that term had. Two draws agree with
    probability 2**-63."""
    return secrets.randbits(63)


def reference_weights(frequencies: NDArray[Any], lengths: NDArray[Any], reference_length: float) -> NDArray[np.float64]:
    """Each posting's reference weight, without idf: `tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / L))`."""
    tf = np.asarray(frequencies, dtype=np.float64)
    norm = 1 - REFERENCE_B + REFERENCE_B * np.asarray(lengths, dtype=np.float64) / reference_length
    return tf * (REFERENCE_K1 + 1) / (tf + REFERENCE_K1 * norm)


def cut_of(weights: NDArray[np.float64], size: int) -> float:
    """The cut that keeps `size` postings of `weights` (and every one sharing the lowest kept weight)."""
    if len(weights) <= size:
        return float(weights.min()) if len(weights) else 0.0
    return float(np.partition(weights, len(weights) - size)[len(weights) - size])


def frontier_of(
    frequencies: NDArray[Any], lengths: NDArray[Any], previous: NDArray[np.uint32] | None = None
) -> NDArray[np.uint32]:
    """The non-dominated `(term frequency, least length)` pairs of postings (and of `previous` pairs),
    highest frequency first: no kept pair has another with at least its frequency and at most its length."""
    tf = np.asarray(frequencies, dtype=np.int64)
    dl = np.asarray(lengths, dtype=np.int64)
    if previous is not None and len(previous):
        tf = np.concatenate((tf, previous[:, 0].astype(np.int64)))
        dl = np.concatenate((dl, previous[:, 1].astype(np.int64)))
    if not len(tf):
        return np.empty((0, 2), dtype=np.uint32)
    order = np.lexsort((dl, -tf))
    tf, dl = tf[order], dl[order]
    least_before = np.minimum.accumulate(dl)
    keep = np.ones(len(dl), dtype=bool)
    keep[1:] = dl[1:] < least_before[:-1]
    return np.stack((tf[keep], dl[keep]), axis=1).astype(np.uint32)


def _frontier_bytes(frontier: NDArray[np.uint32]) -> bytes:
    return frontier.astype(_PAIRS).tobytes()


def _frontier_from(stored: bytes) -> NDArray[np.uint32]:
    return np.frombuffer(bytes(stored), dtype=_PAIRS).reshape(-1, 2).astype(np.uint32)


_STATE_COLUMNS = 'cut, reference_length, tier_postings, cut_postings, frontier, version'


async def tier_states(
    session: Session, tenant_id: int, term_ids: Sequence[int], level: Level = TOP
) -> dict[int, TierState]:
    """The tiers of `level` of those of `term_ids` that have one."""
    dialect = session.dialect
    found: dict[int, TierState] = {}
    ids = sorted(set(term_ids))
    for start in range(0, len(ids), CHUNK):
        rows = await session.rows(
            f'SELECT term_id, {_STATE_COLUMNS} FROM {level.states} '  # noqa: S608 (constant fragments)
            f'WHERE tenant_id = $1 AND term_id {dialect.in_array(2, "bigint")}',
            tenant_id,
            dialect.array(ids[start : start + CHUNK]),
        )
        for term_id, cut, length, held, kept, frontier, version in rows:
            found[int(term_id)] = TierState(
                int(term_id), float(cut), float(length), int(held), int(kept), _frontier_from(frontier), int(version)
            )
    return found


async def _list_lengths(session: Session, tenant_id: int, term_ids: Sequence[int]) -> dict[int, int]:
    """Each term's postings in the blocks before the write being followed (its merged document count)."""
    dialect = session.dialect
    found: dict[int, int] = {}
    for start in range(0, len(term_ids), CHUNK):
        rows = await session.rows(
            'SELECT term_id, document_count FROM term_documents '  # noqa: S608 (constant fragments)
            f'WHERE tenant_id = $1 AND term_id {dialect.in_array(2, "bigint")}',
            tenant_id,
            dialect.array(term_ids[start : start + CHUNK]),
        )
        found.update((int(term_id), int(count)) for term_id, count in rows)
    return found


def _grouped(term_ids: NDArray[np.int64], *columns: NDArray[np.int64]) -> NewPostings:
    """Postings as `NewPostings`, grouped by term with each term's documents ascending."""
    order = np.lexsort((columns[0], term_ids))
    return NewPostings(term_ids[order], *(column[order] for column in columns))


async def follow_added(session: Session, tenant_id: int, new: NewPostings) -> None:
    """Keep the tiers of `new`'s terms as the blocks just took `new`, before the write's counters are folded
    (`term_documents` still counts the lists without it), at every level: a tiered term's postings that
    reach its cut go to its tier and the rest to its frontier; a term whose list is now the level's `long`
    gets a tier; a tier that has grown `REGROW` times since its cut is cut again."""
    term_ids = np.asarray(new.term_ids, dtype=np.int64)
    if not len(term_ids):
        return
    doc_ids, frequencies, lengths = (np.asarray(column, dtype=np.int64) for column in new[1:])
    terms, added = np.unique(term_ids, return_counts=True)
    added_by_term = dict(zip(terms.tolist(), added.tolist(), strict=True))
    before: dict[int, int] | None = None
    for level in LEVELS:
        states = await tier_states(session, tenant_id, terms.tolist(), level)
        untiered = [int(term) for term in terms.tolist() if int(term) not in states]
        if untiered and before is None:  # Read once: every level compares the same lengths.
            before = await _list_lengths(session, tenant_id, [int(term) for term in terms.tolist()])
        lengths_after = {term: (before or {}).get(term, 0) + added_by_term[term] for term in untiered}
        created = [term for term in untiered if lengths_after[term] >= level.long]
        if states:
            await _extend(session, tenant_id, level, states, term_ids, doc_ids, frequencies, lengths)
        if created:
            await _create(session, tenant_id, level, created, [lengths_after[term] for term in created])


async def _extend(
    session: Session,
    tenant_id: int,
    level: Level,
    states: dict[int, TierState],
    term_ids: NDArray[np.int64],
    doc_ids: NDArray[np.int64],
    frequencies: NDArray[np.int64],
    lengths: NDArray[np.int64],
) -> None:
    """Add the new postings of tiered terms to their tiers or frontiers, and cut again those grown `REGROW` times."""
    tiered = np.array(sorted(states), dtype=np.int64)
    of_tiered = np.isin(term_ids, tiered)
    term_ids, doc_ids, frequencies, lengths = (c[of_tiered] for c in (term_ids, doc_ids, frequencies, lengths))
    at = np.searchsorted(tiered, term_ids)
    cuts = np.array([states[int(term)].cut for term in tiered.tolist()])
    references = np.array([states[int(term)].reference_length for term in tiered.tolist()])
    in_tier = reference_weights(frequencies, lengths, references[at]) >= cuts[at]  # type: ignore[arg-type]
    if in_tier.any():
        await append_to_blocks(
            session,
            tenant_id,
            _grouped(term_ids[in_tier], doc_ids[in_tier], frequencies[in_tier], lengths[in_tier]),
            table=level.postings,
        )
    joined = np.bincount(at[in_tier], minlength=len(tiered))
    updates: list[tuple[Any, ...]] = []
    regrown: list[TierState] = []
    below = ~in_tier
    for index, term_id in enumerate(tiered.tolist()):
        state = states[term_id]
        rest = below & (at == index)
        frontier = frontier_of(frequencies[rest], lengths[rest], state.frontier) if rest.any() else state.frontier
        held = state.tier_postings + int(joined[index])
        if held == state.tier_postings and np.array_equal(frontier, state.frontier):
            continue
        version = new_version() if held != state.tier_postings else state.version  # Postings joined it.
        state = TierState(term_id, state.cut, state.reference_length, held, state.cut_postings, frontier, version)
        if held > REGROW * max(state.cut_postings, level.size):
            regrown.append(state)  # Cut again, with a version of its own.
        else:
            updates.append(
                (tenant_id, term_id, state.cut, held, state.cut_postings, _frontier_bytes(frontier), version)
            )
    await _update_states(session, level, updates)
    if regrown:
        await _cut_again(session, tenant_id, level, regrown)


async def _update_states(session: Session, level: Level, updates: Sequence[tuple[Any, ...]]) -> None:
    """Write `(tenant_id, term_id, cut, tier_postings, cut_postings, frontier, version)` into `level`'s existing
    states."""
    columns = (
        ('tenant_id', 'bigint'),
        ('term_id', 'bigint'),
        ('cut', 'float8'),
        ('tier_postings', 'bigint'),
        ('cut_postings', 'bigint'),
        ('frontier', 'bytea'),
        ('version', 'bigint'),
    )
    await run_batch(
        session,
        f'UPDATE {level.states} AS t SET cut = d.cut, tier_postings = d.tier_postings, '  # noqa: S608
        f'cut_postings = d.cut_postings, frontier = d.frontier, version = d.version '
        f'FROM {session.dialect.batch(columns)} WHERE t.tenant_id = d.tenant_id AND t.term_id = d.term_id',
        sorted(updates, key=lambda row: row[:2]),
    )


_CREATE_READ = 4_000_000
"""About the most postings `_create` reads at once (a million-message tenant's commonest word holds a million)."""


async def create_tiers(session: Session, tenant_id: int | None = None) -> int:
    """Give every list long enough for a level's tier that has none its tier (of `tenant_id`, or of every
    tenant), cut from its whole list; returns how many were made. A rebuild's last step: it writes the
    blocks without following the tiers, and cuts each long list once, with the tenant's final average length."""
    one = '' if tenant_id is None else 'd.tenant_id = $2 AND '
    made = 0
    for level in LEVELS:
        rows = await session.rows(
            'SELECT d.tenant_id, d.term_id, d.document_count FROM term_documents d '  # noqa: S608 (constant fragments)
            f'WHERE {one}d.document_count >= $1 AND NOT EXISTS '
            f'(SELECT 1 FROM {level.states} t WHERE t.tenant_id = d.tenant_id AND t.term_id = d.term_id) '
            'ORDER BY d.tenant_id, d.term_id',
            *((level.long,) if tenant_id is None else (level.long, tenant_id)),
        )
        for tenant, group in groupby(rows, key=lambda row: int(row[0])):
            terms = list(group)
            await _create(session, tenant, level, [int(row[1]) for row in terms], [int(row[2]) for row in terms])
        made += len(rows)
    return made


async def _create(
    session: Session, tenant_id: int, level: Level, term_ids: Sequence[int], sizes: Sequence[int]
) -> None:
    """Give each of `term_ids` (lists of about `sizes` postings) a tier of `level`, cut from its whole list."""
    batch: list[int] = []
    held = 0
    for term_id, size in sorted(zip(term_ids, sizes, strict=True)):
        if batch and held + size > _CREATE_READ:
            await _create_batch(session, tenant_id, level, batch)
            batch, held = [], 0
        batch.append(term_id)
        held += size
    if batch:
        await _create_batch(session, tenant_id, level, batch)


async def _average_length(session: Session, tenant_id: int) -> float:
    """The tenant's average document length as its merged counters give it (0.0 before any merge): what a
    search divides lengths by, so a cut made with it orders a list as searches weigh it."""
    row = await session.one('SELECT document_count, total_length FROM tenants WHERE tenant_id = $1', tenant_id)
    return float(row[1]) / float(row[0]) if row is not None and row[0] else 0.0


async def _create_batch(session: Session, tenant_id: int, level: Level, term_ids: Sequence[int]) -> None:
    lists = await read_blocks(session, tenant_id, term_ids, BLOCKS, with_pending=False)
    average = await _average_length(session, tenant_id)
    rows: list[tuple[Any, ...]] = []
    tiers: list[tuple[int, PostingColumns]] = []
    for term_id in sorted(lists):
        doc_ids, frequencies, lengths = lists[term_id]
        reference = average or float(lengths.mean()) or 1.0
        weights = reference_weights(frequencies, lengths, reference)
        cut = cut_of(weights, level.size)
        keep = weights >= cut
        below = ~keep
        frontier = frontier_of(frequencies[below], lengths[below])
        kept = int(keep.sum())
        rows.append((tenant_id, term_id, cut, reference, kept, kept, _frontier_bytes(frontier), new_version()))
        tiers.append((term_id, PostingColumns(doc_ids[keep], frequencies[keep], lengths[keep])))
    await _write_tiers(session, tenant_id, level, tiers)
    await insert_rows(
        session,
        level.states,
        (
            ('tenant_id', 'bigint'),
            ('term_id', 'bigint'),
            ('cut', 'float8'),
            ('reference_length', 'float8'),
            ('tier_postings', 'bigint'),
            ('cut_postings', 'bigint'),
            ('frontier', 'bytea'),
            ('version', 'bigint'),
        ),
        rows,
        order_by='d.term_id',
    )


async def _write_tiers(
    session: Session, tenant_id: int, level: Level, tiers: Sequence[tuple[int, PostingColumns]]
) -> None:
    """Append each term's tier postings (ascending documents) to its (empty) tier of `level`."""
    if not tiers:
        return
    term_ids = np.concatenate([np.full(len(columns.doc_ids), term_id, dtype=np.int64) for term_id, columns in tiers])
    await append_to_blocks(
        session,
        tenant_id,
        NewPostings(
            term_ids,
            np.concatenate([columns.doc_ids for _, columns in tiers]).astype(np.int64),
            np.concatenate([columns.term_frequencies for _, columns in tiers]).astype(np.int64),
            np.concatenate([columns.lengths for _, columns in tiers]).astype(np.int64),
        ),
        table=level.postings,
    )


async def _cut_again(session: Session, tenant_id: int, level: Level, states: Sequence[TierState]) -> None:
    """Cut grown tiers back to the level's size: the ones dropped join the frontier, the tier is written anew."""
    by_term = {state.term_id: state for state in states}
    tiers = await read_blocks(session, tenant_id, sorted(by_term), level.postings, with_pending=False)
    updates: list[tuple[Any, ...]] = []
    kept_tiers: list[tuple[int, PostingColumns]] = []
    for term_id in sorted(by_term):
        state = by_term[term_id]
        doc_ids, frequencies, lengths = tiers.get(term_id, NO_POSTINGS)
        weights = reference_weights(frequencies, lengths, state.reference_length)
        cut = max(cut_of(weights, level.size), state.cut)
        keep = weights >= cut
        below = ~keep
        frontier = frontier_of(frequencies[below], lengths[below], state.frontier)
        kept = int(keep.sum())
        updates.append((tenant_id, term_id, cut, kept, kept, _frontier_bytes(frontier), new_version()))
        kept_tiers.append((term_id, PostingColumns(doc_ids[keep], frequencies[keep], lengths[keep])))
    dialect = session.dialect
    await session.run(
        f'DELETE FROM {checked_table(level.postings)} WHERE tenant_id = $1 '  # noqa: S608 (constant fragments)
        f'AND term_id {dialect.in_array(2, "bigint")}',
        tenant_id,
        dialect.array(sorted(by_term)),
    )
    await _write_tiers(session, tenant_id, level, kept_tiers)
    await _update_states(session, level, updates)


async def follow_removed(session: Session, doomed: Sequence[tuple[int, int, int]]) -> None:
    """Take removed postings (`(tenant_id, term_id, doc_id)`, just taken out of the blocks) out of the tiers
    of every level too, and give those tiers new versions. Frontiers stay: what lies below a cut only lost
    postings, so they still bound it."""
    for level in LEVELS:
        kept: list[tuple[int, int, int]] = []
        for tenant_id, group in groupby(sorted(doomed), key=lambda row: row[0]):
            rows = list(group)
            tiered = await tier_states(session, tenant_id, sorted({term_id for _, term_id, _ in rows}), level)
            kept += [row for row in rows if row[1] in tiered]
        if kept:
            await remove_from_blocks(session, kept, level.postings)
            await _new_versions(session, level, sorted({(tenant_id, term_id) for tenant_id, term_id, _ in kept}))


async def _new_versions(session: Session, level: Level, tiers: Sequence[tuple[int, int]]) -> None:
    """Give each `(tenant_id, term_id)` tier of `level` a new version (its postings changed)."""
    await run_batch(
        session,
        f'UPDATE {level.states} AS t SET version = d.version '  # noqa: S608 (constant fragments)
        f'FROM {session.dialect.batch((("tenant_id", "bigint"), ("term_id", "bigint"), ("version", "bigint")))} '
        'WHERE t.tenant_id = d.tenant_id AND t.term_id = d.term_id',
        [(tenant_id, term_id, new_version()) for tenant_id, term_id in tiers],
    )
