"""The search reads (`IndexReader`): stats, postings and document rows for a `SearchTarget`.

More in docs/design/store.md.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from ..postings import _tiers
from ..postings._blocks import (
    BLOCK,
    BLOCKS,
    NO_POSTINGS,
    by_segment,
    columns_of,
    joined_postings,
    read_blocks,
    read_lookups,
    read_overlapping,
    read_tiers,
)
from ..protocol import (
    DocumentRow,
    IndexStats,
    PostingColumns,
    SearchTarget,
    TargetPostings,
    TieredPostings,
    TierLookups,
)
from ..sql._keys import run_id_of, scope_key
from ..sql._session import Dialect, Row, Session
from ._context import document_rows, hits_query
from ._occurrences import page_rows
from ._tier_cache import TierCache

__all__ = (
    'DEEP_AT_ONCE',
    'PRUNING_PAYS',
    'Target',
    'document_frequencies',
    'documents',
    'index_stats',
    'resolve',
    'target_postings',
    'tiered_postings',
)


@dataclass(frozen=True, kw_only=True)
class Target:
    """A `SearchTarget`'s keys and counters, as `resolve` found them."""

    tenant_id: int
    conv_key: int | None
    run_key: int | None
    """Only meaningful when `filtered`."""
    filtered: bool
    """A run-filtered target: only documents said in run `run_key`."""
    role: str | None
    document_count: int
    """The conversation's documents (the tenant's for a scope-wide target)."""
    total_length: int
    tenant_document_count: int
    superseded: bool = False
    """Also the documents only superseded entries hold (`SearchTarget.include_superseded`)."""
    hidden: bool = False
    """The conversation holds superseded documents, which this search leaves out (`index._superseded`)."""


_SEGMENTS = (
    'WITH segments AS (SELECT x.tenant_id, x.segment, x.document_count, x.total_length '
    'FROM index_segments x JOIN tenants y ON y.tenant_id = x.tenant_id WHERE y.scope_key = $1)'
)
_RESOLVED = (
    'SELECT t.tenant_id, t.document_count + coalesce(g.document_count, 0), '
    't.total_length + coalesce(g.total_length, 0), c.conv_key, c.document_count, c.total_length, '
    '(SELECT r.run_key FROM runs r WHERE r.run_id = $3), w.term, w.term_id, '
    'coalesce((SELECT s.document_count FROM term_documents s '
    'WHERE s.tenant_id = t.tenant_id AND s.term_id = w.term_id), 0) '
    '+ coalesce((SELECT sum((SELECT sum(length(p.postings)) FROM pending_postings p '
    'WHERE p.tenant_id = z.tenant_id AND p.segment = z.segment AND p.term_id = w.term_id)) '
    'FROM segments z), 0) / 12, '
    'EXISTS (SELECT 1 FROM conversation_documents h{marked} WHERE h.conv_key = c.conv_key AND h.superseded) '
    'FROM tenants t LEFT JOIN conversations c ON c.conversation_id = $2 AND c.tenant_id = t.tenant_id '
    'LEFT JOIN (SELECT CAST(sum(z.document_count) AS BIGINT) AS document_count, '
    'CAST(sum(z.total_length) AS BIGINT) AS total_length FROM segments z) g ON true '
    'LEFT JOIN ({terms} {join} terms w ON w.term = value) ON true '
    'WHERE t.scope_key = $1'
)
_RESOLVE = f'{_SEGMENTS} {_RESOLVED}'
"""The target's keys and counters, one row per query term ($4) known to the store (one row with NULL
terms when none is): from the query's few terms to their ids and tenant counts, never the reverse;
and whether the conversation has superseded members (a probe of a partial index). A tenant's
counters are what merges folded plus what its pending segments hold (`postings._segments`), read in
one statement: one state of the index, whatever a merge commits meanwhile. A term's pending postings are
summed segment by segment, each a probe of `pending_postings`' key (tenant, segment, term): given the
segments as a list instead, PostgreSQL probed by (tenant, term) and walked the tenant's whole key range
per term, 10 ms and more at a few thousand pending rows (docs/design/store.md, "The pending count").
The segments are read once (`segments`, which PostgreSQL materialises as it is read more than once), not
once for the counters and once per term: segments come and go with every merge, and where autovacuum lags
each read of their key range steps over every dead one (0.4 ms at 10,000, read five times for four terms)."""

_RESOLVED_COLUMNS = (
    'tenant_id, tenant_documents, tenant_length, conv_key, conv_documents, conv_length, run_key, term, term_id, '
    'listed, hidden'
)

_RESOLVE_READING_SHORT = (
    '{segments}, resolved({columns}) AS ({resolved}), '
    'short(lists) AS (SELECT coalesce(sum(listed), 0) < $5 FROM resolved) '
    'SELECT r.*, k.first_doc, k.postings FROM resolved r LEFT JOIN LATERAL (SELECT * FROM ('
    'SELECT b.first_doc, b.postings FROM posting_blocks b WHERE b.tenant_id = r.tenant_id AND b.term_id = r.term_id '
    'UNION ALL {pending}) u WHERE (SELECT lists FROM short)) k ON true'
)
"""`_RESOLVE`, and when its terms' lists hold fewer than `$5` postings together (`_tiers.LONG`: lists a
search reads whole), every block and pending row of them too, as `first_doc, postings` after the
resolved columns: one row per block (a term's columns repeated), and one with NULLs for a term it reads
none of. Only where each statement is a round trip: a rare id's search sends two instead of three.
The sum is a `WHERE` on the union, which PostgreSQL evaluates once, before reading anything: as the
join's `ON` condition it read every block of common words and dropped them after (199 ms for three at
500,000 messages; docs/design/store.md, "Short lists read with their terms")."""

_WITH_SUPERSEDED = (
    'SELECT count(*), coalesce(sum(d.length), 0) FROM conversation_documents m '
    'JOIN documents d ON d.doc_id = m.doc_id WHERE m.conv_key = $1'
)
"""A conversation's counters with its superseded members: counted when asked for (its stored ones leave them out)."""


def _resolve_fields(dialect: Dialect) -> dict[str, str]:
    """What `_RESOLVED` leaves to the dialect: the terms' array, the join in order, the marked members' index."""
    return {'terms': dialect.each(4, 'text'), 'join': dialect.join_in_order, 'marked': dialect.marked_members}


@functools.lru_cache(maxsize=4)
def _resolve_sql(dialect: Dialect) -> str:
    return _RESOLVE.format(**_resolve_fields(dialect))


@functools.lru_cache(maxsize=4)
def _resolve_reading_short_sql(dialect: Dialect) -> str:
    pending = by_segment(
        dialect, 'segments s', ' AND p.term_id = r.term_id', 'p.first_doc, p.postings', tenant='s.tenant_id'
    )
    return _RESOLVE_READING_SHORT.format(
        segments=_SEGMENTS,
        columns=_RESOLVED_COLUMNS,
        resolved=_RESOLVED.format(**_resolve_fields(dialect)),
        pending=pending,
    )


TermRow = tuple[str, int, int]
"""A query term the target's tenant holds: `(term, term_id, tenant document count)`."""


def _read_whole(term_rows: Sequence[TermRow]) -> bool:
    """Whether a scope-wide search reads these terms' lists whole, without asking for tiers: together they
    hold fewer postings than one list a tier is made for (a rare id, say), where pruning could not pay."""
    return sum(count for _, _, count in term_rows) < _tiers.LONG


async def resolve(
    session: Session, target: SearchTarget, terms: Sequence[str] = ()
) -> tuple[Target, list[TermRow]] | None:
    """The target's keys, and those of the `terms` its tenant holds, in one statement; `None` when
    nothing can match (unknown tenant, conversation or run)."""
    dialect = session.dialect
    rows = await session.rows(_resolve_sql(dialect), *_target_params(target), dialect.array(dict.fromkeys(terms)))
    return await _resolved(session, target, rows)


async def _resolve_reading_short(
    session: Session, target: SearchTarget, terms: Sequence[str]
) -> tuple[tuple[Target, list[TermRow]] | None, dict[int, PostingColumns] | None]:
    """`resolve`, and where statements are round trips, the postings of the terms (`term_id -> postings`,
    with their pending rows) in the same statement when their lists hold fewer than `_tiers.LONG`
    together (those a search reads whole); `None` for the postings otherwise."""
    dialect = session.dialect
    if not dialect.statements_are_round_trips:
        return await resolve(session, target, terms), None
    rows = await session.rows(
        _resolve_reading_short_sql(dialect), *_target_params(target), dialect.array(dict.fromkeys(terms)), _tiers.LONG
    )
    found = await _resolved(session, target, rows)
    if found is None or not _read_whole(found[1]):
        return found, None
    return found, columns_of([(row[8], row[11], row[12]) for row in rows if row[11] is not None and row[9]])


async def _resolved(session: Session, target: SearchTarget, rows: Sequence[Row]) -> tuple[Target, list[TermRow]] | None:
    """What `resolve` returns, from the rows of `_RESOLVE` (or `_RESOLVE_READING_SHORT`: a term's row once)."""
    if not rows:
        return None
    row = rows[0]
    filtered = target.run_id is not None
    if filtered and row[6] is None:
        return None
    own = target.conversation_id is not None
    if own and row[3] is None:
        return None
    counts = (row[4], row[5]) if own else (row[1], row[2])
    hidden = own and bool(row[10])
    if hidden and target.include_superseded:
        counted = await session.one(_WITH_SUPERSEDED, row[3])
        assert counted is not None
        counts = (int(counted[0]), int(counted[1]))
    resolved = Target(
        tenant_id=row[0],
        conv_key=row[3],
        run_key=row[6],
        filtered=filtered,
        role=target.role,
        document_count=counts[0],
        total_length=counts[1],
        tenant_document_count=row[1],
        superseded=target.include_superseded,
        hidden=hidden and not target.include_superseded,
    )
    terms = {int(row[8]): (str(row[7]), int(row[8]), int(row[9])) for row in rows if row[7] is not None and row[9]}
    return resolved, list(terms.values())


def _target_params(target: SearchTarget) -> tuple[object, ...]:
    """`$1` scope key, `$2` conversation id, `$3` run id: what `resolve` and `_TARGET` read."""
    return (scope_key(target.scope), target.conversation_id, target.run_id)


async def index_stats(session: Session, target: SearchTarget) -> IndexStats | None:
    return await _stats(session, target, await resolve(session, target))


async def _stats(
    session: Session, target: SearchTarget, found: tuple[Target, list[TermRow]] | None
) -> IndexStats | None:
    """The target's document count and total length, given what `resolve` found for it."""
    if found is None:
        # Fail closed: a conversation outside the scope is reported exactly like a missing one.
        exists = target.conversation_id is None or await session.one(
            'SELECT 1 FROM conversations c JOIN tenants t ON t.tenant_id = c.tenant_id '
            'WHERE c.conversation_id = $1 AND t.scope_key = $2',
            target.conversation_id,
            scope_key(target.scope),
        )
        return IndexStats(document_count=0, total_length=0) if exists else None
    resolved = found[0]
    if not resolved.filtered:
        return IndexStats(document_count=resolved.document_count, total_length=resolved.total_length)
    sql, params = _run_documents(resolved, with_role=False)
    counted = 'SELECT count(*), coalesce(sum(d.length), 0) FROM run_documents r JOIN documents d ON d.doc_id = r.doc_id'
    row = await session.one(sql + counted, *params)
    assert row is not None
    return IndexStats(document_count=int(row[0]), total_length=int(row[1]))


_RUN_DOCUMENTS = (
    'WITH RECURSIVE convs(conv_key) AS ({conversations}), '
    'chain(conv_key, k) AS (SELECT c.conv_key, c.head_key FROM conversations c '
    'WHERE c.conv_key IN (SELECT conv_key FROM convs) AND c.head_key IS NOT NULL '
    'UNION SELECT b.conv_key, b.entry_key FROM conversation_branches b '
    'WHERE b.conv_key IN (SELECT conv_key FROM convs) '
    'UNION SELECT chain.conv_key, e.parent_key FROM chain JOIN entries e ON e.entry_key = chain.k '
    'WHERE e.parent_key IS NOT NULL), '
    'run_documents(doc_id) AS ('
    'SELECT d.doc_id FROM chain JOIN entries e ON e.entry_key = chain.k JOIN documents d '
    'ON d.tenant_id = $1 AND d.content_hash = e.content_hash WHERE e.run_key = $2 AND NOT e.unindexed{role}{visible} '
    'UNION SELECT m.doc_id FROM conversation_documents m JOIN documents d ON d.doc_id = m.doc_id '
    'WHERE m.run_key = $2 AND m.conv_key IN (SELECT conv_key FROM convs){current}{role}) '
)
"""The documents said in run `$2`: those an entry of the run holds in the histories of the target's
conversation (its head's and its kept branches'), or of each of the tenant's (`$1`) conversations the
run said something new in, and those first said in the run (found once, as `index._occurrences` shows
them). Membership rows remember only a document's first run, so a run that repeated earlier words is
found by its entries. Without `include_superseded`, not the documents marked superseded in the
conversation whose history holds them."""

_VISIBLE = (
    ' AND NOT EXISTS (SELECT 1 FROM conversation_documents x '
    'WHERE x.conv_key = chain.conv_key AND x.doc_id = d.doc_id AND x.superseded)'
)

_RUN_CONVERSATIONS = (
    'SELECT DISTINCT m.conv_key FROM conversation_documents m JOIN conversations c ON c.conv_key = m.conv_key '
    'WHERE m.run_key = $2 AND c.tenant_id = $1'
)


def _run_documents(resolved: Target, *, with_role: bool) -> tuple[str, list[object]]:
    """`_RUN_DOCUMENTS` for a run-filtered target (the role filter too, with `with_role`), and its parameters."""
    params: list[object] = [resolved.tenant_id, resolved.run_key]
    if resolved.conv_key is None:
        conversations = _RUN_CONVERSATIONS
    else:
        params.append(resolved.conv_key)
        conversations = 'SELECT conv_key FROM conversations WHERE conv_key = $3'
    role = ''
    if with_role and resolved.role is not None:
        params.append(resolved.role)
        role = f' AND d.role = ${len(params)}'
    current, visible = ('', '') if resolved.superseded else (' AND NOT m.superseded', _VISIBLE)
    return _RUN_DOCUMENTS.format(conversations=conversations, role=role, current=current, visible=visible), params


async def document_frequencies(session: Session, target: SearchTarget, terms: Sequence[str]) -> dict[str, int] | None:
    """How many of the tenant's documents hold each term, for a target spanning its tenant (`None` for
    a narrower one, or an unknown tenant): the counters kept at write time, no posting read."""
    if target.conversation_id is not None or target.run_id is not None or target.role is not None:
        return None
    found = await resolve(session, target, terms)
    return None if found is None else {term: count for term, _, count in found[1]}


async def target_postings(session: Session, target: SearchTarget, terms: Sequence[str]) -> TargetPostings | None:
    """The target's stats and each term's postings among its documents as arrays, in `doc_id` order
    (terms with none are left out, the others in the order of `terms`): one `resolve` for both.

    A target narrower than its tenant (a conversation, a run, a role) first reads its documents'
    ids, then only the blocks that can hold them (`postings._blocks.read_overlapping`): the cost follows the
    target's size, not the length of a common term's list across the tenant. A term with fewer
    blocks than the target has separate id ranges is read whole instead.
    """
    wanted = list(dict.fromkeys(terms))
    found = await resolve(session, target, wanted)
    stats = await _stats(session, target, found)
    if stats is None:
        return None
    columns = {} if found is None or not found[1] else await _columns(session, *found, wanted)
    return TargetPostings(stats=stats, columns=columns)


async def _columns(
    session: Session, resolved: Target, term_rows: list[TermRow], wanted: list[str]
) -> dict[str, PostingColumns]:
    names = {term_id: term for term, term_id, _ in term_rows}
    allowed = await _documents_of(session, resolved)
    if allowed is None:
        stored = await read_blocks(session, resolved.tenant_id, list(names))
    elif not len(allowed):
        return {}
    else:
        spans = _spans(allowed)
        # A term in fewer blocks than the target has ranges is read whole: one range over every id.
        ranges = [
            (term_id, low, high)
            for _, term_id, count in term_rows
            for low, high in (spans if len(spans) <= count // BLOCK else [(0, _EVERY_ID)])
        ]
        stored = await read_overlapping(session, resolved.tenant_id, ranges)
        for term_id, columns in stored.items():  # Only the target's documents are kept.
            doc_ids, frequencies, lengths = columns
            keep = np.isin(doc_ids, allowed)
            stored[term_id] = PostingColumns(doc_ids[keep], frequencies[keep], lengths[keep])
    by_name = {names[term_id]: columns for term_id, columns in stored.items() if len(columns.doc_ids)}
    return {term: by_name[term] for term in wanted if term in by_name}


DEEP_AT_ONCE = 4
"""A search of this many tiered terms or more reads the deeper tiers of those that keep one at once, without
their top tiers first: at a million messages (docs/design/store.md, "Deeper tiers") most four-word queries
are not proven by the top tiers, and their bounds and reads were spent for nothing."""

PRUNING_PAYS = 4
"""The tiers are searched when the tiered terms' lists hold at least this many times their tiers' postings:
below that, scoring every posting costs less than the bounds and lookups (docs/design/store.md)."""


async def tiered_postings(
    session: Session, target: SearchTarget, terms: Sequence[str], lookups: TierLookups, cache: TierCache
) -> TieredPostings | None:
    """`TieredIndex.tiered_postings`: a scope-wide target's counters, each query term's tier (with its
    pending postings) and frontier, or its whole list when it has no tier; then what `lookups` asks
    for: documents' postings, or a term read further down (its deeper tier where it has one, else its
    whole list). `None` for a narrower target."""
    if target.conversation_id is not None or target.run_id is not None or target.role is not None:
        return None
    wanted = list(dict.fromkeys(terms))
    found, short_lists = await _resolve_reading_short(session, target, wanted)
    stats = await _stats(session, target, found)
    assert stats is not None  # A scope-wide target always has stats (empty for an unknown tenant).
    if found is None or not found[1]:
        return TieredPostings(stats=stats, known={}, frequencies={}, frontiers={})
    resolved, term_rows = found
    tenant_id = resolved.tenant_id
    names = {term_id: term for term, term_id, _ in term_rows}
    frequencies = {term: count for term, _, count in term_rows}
    # Lists that together hold fewer postings than one list a tier is made for are read whole, without
    # asking for tiers: a round trip saved where the pruning could not pay (a rare id, say).
    short = _read_whole(term_rows)
    tiers = {} if short else await _tiers.tier_states(session, tenant_id, list(names))
    listed = sum(count for _, term_id, count in term_rows if term_id in tiers)
    if listed < PRUNING_PAYS * sum(state.tier_postings for state in tiers.values()):
        tiers = {}  # Lists hardly longer than their tiers: reading them whole costs less than bounding them.
    if short_lists is not None:  # Read whole with the terms (`_RESOLVE_READING_SHORT`).
        known = short_lists
    else:
        known = await read_blocks(session, tenant_id, [term_id for term_id in names if term_id not in tiers], BLOCKS)
    # From `DEEP_AT_ONCE` tiered terms on, the top tiers rarely prove a page: the lists that keep a deeper
    # tier are read down to it at once, sparing a round of reads and the bounds of the top tiers.
    at_once = len(tiers) >= DEEP_AT_ONCE
    deep = await _tiers.tier_states(session, tenant_id, list(tiers), _tiers.DEEP) if at_once else {}
    frontiers: dict[int, NDArray[np.uint32]] = {}
    for level, before in ((_tiers.TOP, {t: s for t, s in tiers.items() if t not in deep}), (_tiers.DEEP, deep)):
        lists, bounded = await _read_level(session, tenant_id, before, level, cache)
        known.update(lists)
        frontiers.update(bounded)
    # The deeper tiers left to read: none once read at once (the lists read top first had none then).
    deeper = (
        {} if at_once or not frontiers else await _tiers.tier_states(session, tenant_id, list(frontiers), _tiers.DEEP)
    )
    read = TieredPostings(
        stats=stats,
        known={names[term_id]: columns for term_id, columns in known.items()},
        frequencies=frequencies,
        frontiers={names[term_id]: frontier for term_id, frontier in frontiers.items()},
        deeper=frozenset(names[term_id] for term_id in deeper if term_id in frontiers),
    )
    ids = {term: term_id for term_id, term in names.items()}
    asked: Mapping[str, NDArray[np.int64] | None] | None = {}
    while read.frontiers and (asked := lookups(read)):
        further = [term for term, doc_ids in asked.items() if doc_ids is None]
        deepened = [ids[term] for term in further if term in read.deeper]
        whole = [ids[term] for term in further if term not in read.deeper]
        known, kept = dict(read.known), dict(read.frontiers)
        if deepened:
            lists, bounded = await _read_level(session, tenant_id, {t: deeper[t] for t in deepened}, _tiers.DEEP, cache)
            for term_id in deepened:  # What the deeper tier holds replaces what the top tier held.
                known[names[term_id]] = lists[term_id]
                if term_id in bounded:
                    kept[names[term_id]] = bounded[term_id]
                else:
                    kept.pop(names[term_id], None)  # Gone meanwhile: `lists` holds its whole list.
        if whole:
            lists = await read_blocks(session, tenant_id, whole, BLOCKS)
            known.update({names[term_id]: columns for term_id, columns in lists.items()})
            for term_id in whole:
                known.setdefault(names[term_id], NO_POSTINGS)
            kept = {term: frontier for term, frontier in kept.items() if ids[term] not in whole}
        wanted = {ids[term]: doc_ids for term, doc_ids in asked.items() if doc_ids is not None}
        looked_up = dict(read.looked_up)
        for term_id, found in (await read_lookups(session, tenant_id, wanted)).items():
            before = looked_up.get(names[term_id])
            looked_up[names[term_id]] = found if before is None else joined_postings(before, found)
        read = replace(read, known=known, frontiers=kept, looked_up=looked_up, deeper=read.deeper - set(further))
    if read.frontiers and asked is None:  # The tiers cannot prove the page: every posting.
        whole = await read_blocks(session, tenant_id, [ids[term] for term in read.frontiers], BLOCKS)
        known = {**read.known, **{names[term_id]: columns for term_id, columns in whole.items()}}
        return TieredPostings(stats=stats, known=known, frequencies=frequencies, frontiers={})
    return read


async def _read_level(
    session: Session, tenant_id: int, before: Mapping[int, _tiers.TierState], level: _tiers.Level, cache: TierCache
) -> tuple[dict[int, PostingColumns], dict[int, NDArray[np.uint32]]]:
    """The tiers of `level` of the terms of `before` (their states as read before), with the lists' pending
    postings, and their frontiers. A tier kept in `cache` at the version `before` gives is not read again.

    The states are read again after the tiers: a merge committing between the reads moves a pending
    posting (read) below a cut and into a frontier read after it, so none is missed by both. Where one
    read sees no snapshot (PostgreSQL), a tier gone meanwhile (a rebuild), or kept and changed meanwhile,
    has its whole list read instead, with no frontier. A tier read while its version held is kept."""
    if not before:
        return {}, {}
    kept = {
        t: c for t, state in before.items() if (c := cache.get(tenant_id, t, level.deep, state.version)) is not None
    }
    tiers, pending = await read_tiers(
        session, tenant_id, level.postings, [t for t in before if t not in kept], list(before)
    )
    after = await _tiers.tier_states(session, tenant_id, list(before), level)
    lists: dict[int, PostingColumns] = {}
    frontiers: dict[int, NDArray[np.uint32]] = {}
    whole: list[int] = []
    for term_id, state in before.items():
        now = after.get(term_id)
        held = state.version == (now.version if now is not None else None)
        if now is None or (term_id in kept and not held):
            whole.append(term_id)
            continue
        tier = kept.get(term_id)
        if tier is None:
            tier = tiers.get(term_id, NO_POSTINGS)
            if held:
                cache.put(tenant_id, term_id, level.deep, state.version, tier)
        found = pending.get(term_id)
        # A tier read while its version held is the one kept: its last join with the same pending postings.
        joined = cache.joined(tenant_id, term_id, level.deep, state.version, found) if held else None
        lists[term_id] = joined if joined is not None else joined_postings(tier, found)
        frontiers[term_id] = now.frontier
    if whole:
        read = await read_blocks(session, tenant_id, whole, BLOCKS)
        lists.update({term_id: read.get(term_id, NO_POSTINGS) for term_id in whole})
    return lists, frontiers


_SPAN_GAP = BLOCK
"""Ids of the target's documents this close together are read as one range."""

_EVERY_ID = 2**63 - 1
"""At or above every document id (64-bit: derived ids lie below `index._terms.FIRST_ALLOCATED`, allocated
ones from it up)."""


def _spans(doc_ids: NDArray[np.int64]) -> list[tuple[int, int]]:
    """Sorted `doc_ids` as `(low, high)` ranges, split where two neighbours lie more than `_SPAN_GAP` apart."""
    breaks = np.flatnonzero(np.diff(doc_ids) > _SPAN_GAP)
    lows = doc_ids[np.concatenate(([0], breaks + 1))].tolist()
    highs = doc_ids[np.concatenate((breaks, [len(doc_ids) - 1]))].tolist()
    return list(zip(lows, highs, strict=True))


_MEMBERS = 'SELECT m.doc_id AS value FROM conversation_documents m '
_OF_DOCUMENTS = 'JOIN documents d ON d.doc_id = m.doc_id '
"""A narrowed target's documents: memberships, joined to their documents where the tenant or the role is checked."""


async def _documents_of(session: Session, resolved: Target) -> NDArray[np.int64] | None:
    """The sorted ids of the target's documents; `None` when they are all of its tenant's."""
    dialect = session.dialect
    if resolved.filtered:
        sql, run_params = _run_documents(resolved, with_role=True)
        ids = dialect.array_of('SELECT doc_id AS value FROM run_documents')
        value = await session.value(f'{sql}SELECT {ids}', *run_params)
        return np.sort(np.array(dialect.read_array(value), dtype=np.int64))
    role = resolved.role is not None
    conditions: list[str] = []
    params: list[object] = []

    def where(condition: str, value: object) -> None:
        params.append(value)
        conditions.append(condition.format(f'${len(params)}'))

    if resolved.conv_key is not None:
        if not role and resolved.document_count == resolved.tenant_document_count:
            return None
        where('m.conv_key = {}', resolved.conv_key)
        if resolved.hidden:
            conditions.append('NOT m.superseded')
        select = _MEMBERS + (_OF_DOCUMENTS if role else '') + 'WHERE '
    elif role:
        where('d.tenant_id = {}', resolved.tenant_id)
        select = 'SELECT d.doc_id AS value FROM documents d WHERE '
    else:
        return None
    if role:
        where('d.role = {}', resolved.role)
    value = await session.value(f'SELECT {dialect.array_of(select + " AND ".join(conditions))}', *params)
    return np.sort(np.array(dialect.read_array(value), dtype=np.int64))


# --- Document rows: one statement on both backends ---------------------------------------------------

_TARGET = (
    'WITH tenant AS (SELECT tenant_id, document_count FROM tenants WHERE scope_key = $1), '
    'conv AS (SELECT conv_key, document_count * 4 <= (SELECT document_count FROM tenant) AS small '
    'FROM conversations WHERE conversation_id = $2 AND tenant_id = (SELECT tenant_id FROM tenant)), '
    'run AS (SELECT run_key FROM runs WHERE run_id = $3) '
)
"""Resolves a target inside the statement that uses it (`_target_params`): one round trip instead of
two. A part that does not exist resolves to NULL, which matches no row, so an unknown tenant,
conversation or run answers nothing, exactly as a failed `resolve` does. Read alike by both backends."""

_ROW_COLUMNS = (
    f'SELECT cd.doc_id, cd.entry_key, cd.position, cd.run_key, {run_id_of("cd.run_key")}, e.entry_id, e.message, '  # noqa: S608 (constant fragments)
    '(SELECT c.conversation_id FROM conversations c WHERE c.conv_key = cd.conv_key), cd.conv_key, cd.occurrences, '
    'd.content_hash, d.role '
)
_ROW_JOINS = 'JOIN documents d ON d.doc_id = cd.doc_id JOIN entries e ON e.entry_key = cd.entry_key '
_OWN_CONVERSATION = (
    ' AND (SELECT c.tenant_id FROM conversations c WHERE c.conv_key = cd.conv_key) = (SELECT tenant_id FROM tenant)'
)
"""A membership row's conversation is the tenant's: each conversation read by its key, per row. Joined instead,
with the tenant as a condition on it, PostgreSQL without statistics (autovacuum off) read every conversation
of the tenant to hash them: 2.8 ms of a rare id's 5.3 at a million messages, against 0.6 ms with statistics
(docs/design/store.md, "The document rows' conversations")."""


@functools.lru_cache(maxsize=64)
def _documents_sql(dialect: Dialect, in_conversation: bool, of_run: bool, with_role: bool, superseded: bool) -> str:
    """The membership rows of the wanted documents ($4) in the target, first appearance first; without
    `superseded`, not those marked superseded in their conversation."""
    if in_conversation:
        sql = (
            _ROW_COLUMNS  # noqa: S608 (constant SQL fragments only; values are parameters)
            + 'FROM conversation_documents cd '
            + _ROW_JOINS
            + f'WHERE cd.conv_key = (SELECT conv_key FROM conv) AND cd.doc_id {dialect.in_array(4, "bigint")}'  # noqa: S608
        )
    else:
        # The document must be the tenant's, and so (documents being per tenant) is every conversation
        # holding it. A planner that takes the ids as an index condition (`= ANY`) chooses the order
        # itself; otherwise the read is driven from the wanted ids (SQLite's `CROSS JOIN` fixes its
        # join order), so the cost follows the page, not the tenant's number of conversations.
        if dialect.supports_join_planning:
            source, wanted = 'FROM conversation_documents cd ', f' AND cd.doc_id {dialect.in_array(4, "bigint")}'
        else:
            ids = dialect.each(4, 'bigint')
            source, wanted = f'FROM {ids} {dialect.join_in_order} conversation_documents cd ON cd.doc_id = value ', ''
        sql = (
            _ROW_COLUMNS  # noqa: S608 (constant SQL fragments only; values are parameters)
            + source
            + _ROW_JOINS
            + 'WHERE d.tenant_id = (SELECT tenant_id FROM tenant)'
            + _OWN_CONVERSATION
            + wanted
        )
    if of_run:  # A repeated document may have been said in the run after its first time (`page_rows`).
        sql += ' AND (cd.run_key = (SELECT run_key FROM run) OR cd.occurrences > 1)'
    if with_role:
        sql += ' AND d.role = $5'
    if not superseded:
        sql += ' AND NOT cd.superseded'
    return _TARGET + sql + ' ORDER BY cd.entry_key, cd.conv_key'


async def documents(
    session: Session,
    target: SearchTarget,
    doc_ids: Sequence[int],
    *,
    context: int = 0,
    limit: int | None = None,
    exclude_run_id: str | None = None,
) -> list[DocumentRow]:
    if not doc_ids:
        return []
    dialect = session.dialect
    ids = [int(doc_id) for doc_id in doc_ids]
    sql = _documents_sql(
        dialect,
        target.conversation_id is not None,
        target.run_id is not None,
        target.role is not None,
        target.include_superseded,
    )
    role = () if target.role is None else (target.role,)
    rows = await session.rows(sql, *_target_params(target), dialect.array(ids), *role)
    page = await page_rows(session, ids, rows, run_id=target.run_id, exclude_run_id=exclude_run_id, limit=limit)
    roles = {int(row[0]): str(row[11]) for row in rows}
    return await document_rows(page, hits_query(session), context, roles=roles)
