"""`ImpactReader`: scope-wide reads in impact order, so a search skips most of a common term's postings.

Used by `temporal_recall.search._plan._ranked_by_impact` for a target spanning a whole tenant, where a
common term's posting list can hold most of the store: only the head of each term-frequency group is
read, plus exact lookups for the candidates other terms found. A conversation, run or role target
gets `None` and the search reads whole posting lists (`_reader.postings`). Every read resolves the
tenant inside its own statement and walks the `postings_by_impact` index (migration 2).

Document frequencies and candidate lookups are one statement on both backends. The heads of the
frequency groups are found by a loose index scan (one descent per distinct term frequency); PostgreSQL
reads every group's head in the same statement (`LATERAL`), SQLite, which has no `LATERAL` and pays
nothing per statement on its connection thread, one statement per group.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._protocol import Posting, SearchTarget
from ._serialization import scope_key
from ._session import Session

__all__ = ('document_frequencies', 'postings_for', 'top_postings')


def _serves(target: SearchTarget) -> bool:
    return target.conversation_id is None and target.run_id is None and target.role is None


async def document_frequencies(session: Session, target: SearchTarget, terms: Sequence[str]) -> dict[str, int] | None:
    """How many of the tenant's documents hold each term; `None` for a target this path does not serve."""
    if not _serves(target):
        return None
    dialect = session.dialect
    rows = await session.rows(
        # From the query's few terms to their counters, never the reverse.
        'WITH tenant AS (SELECT tenant_id FROM tenants WHERE scope_key = $1) '  # noqa: S608 (constant fragments)
        'SELECT t.term, (SELECT s.document_count FROM term_documents s '
        'WHERE s.tenant_id = tenant.tenant_id AND s.term_id = t.term_id) '
        f'FROM tenant LEFT JOIN ({dialect.each(2, "text")} {dialect.join_in_order} terms t ON t.term = value) ON true',
        scope_key(target.scope),
        dialect.array(dict.fromkeys(terms)),
    )
    if not rows:
        return None  # No such tenant.
    return {row[0]: int(row[1]) for row in rows if row[0] is not None and row[1]}


_GROUPS = """
groups(tf) AS (
    SELECT max(term_frequency) FROM postings WHERE tenant_id = $1 AND term_id = $2
    UNION ALL
    SELECT (SELECT max(term_frequency) FROM postings
            WHERE tenant_id = $1 AND term_id = $2 AND term_frequency < groups.tf)
    FROM groups WHERE groups.tf IS NOT NULL
)
"""
"""The distinct term frequencies of term `$2`'s postings in tenant `$1`, highest first, by a loose index scan."""

_HEAD = (
    'SELECT doc_id, term_frequency, length FROM postings WHERE tenant_id = $1 AND term_id = $2 AND term_frequency = '
)
"""A group's postings, shortest first (`ORDER BY length, doc_id LIMIT $3` follows)."""

_TOP = (
    'WITH RECURSIVE '  # noqa: S608 (constant SQL fragments only; values are parameters)
    + _GROUPS
    + 'SELECT head.doc_id, head.term_frequency, head.length FROM groups CROSS JOIN LATERAL ('
    + _HEAD
    + 'groups.tf ORDER BY length, doc_id LIMIT $3) AS head WHERE groups.tf IS NOT NULL '
    'ORDER BY head.term_frequency DESC, head.length, head.doc_id'
)
"""PostgreSQL: `$3` rows of each group in one statement instead of one per group."""


async def top_postings(
    session: Session, target: SearchTarget, term: str, per_group: int
) -> tuple[list[Posting], list[tuple[int, int]]] | None:
    """The `per_group` shortest documents of each term-frequency group, and where each unfinished group stopped.

    Returns `(postings, frontier)`: `frontier` holds `(term_frequency, length)` for every group that
    has more documents, all of them at least that long, so none can outscore that pair for this term.
    """
    if not _serves(target):
        return None
    found = await session.one(
        'SELECT (SELECT tenant_id FROM tenants WHERE scope_key = $1), (SELECT term_id FROM terms WHERE term = $2)',
        scope_key(target.scope),
        term,
    )
    if found is None or found[0] is None:
        return None
    if found[1] is None:
        return [], []
    tenant_id, term_id = found
    if session.dialect.plans_joins:
        rows = list(await session.rows(_TOP, tenant_id, term_id, per_group + 1))
    else:
        rows = []
        for (frequency,) in await session.rows(
            'WITH RECURSIVE ' + _GROUPS + 'SELECT tf FROM groups WHERE tf IS NOT NULL',  # noqa: S608 (constant SQL)
            tenant_id,
            term_id,
        ):
            rows += await session.rows(
                _HEAD + '$3 ORDER BY length, doc_id LIMIT $4', tenant_id, term_id, frequency, per_group + 1
            )
    postings: list[Posting] = []
    frontier: list[tuple[int, int]] = []
    group: list[Posting] = []
    for row in [*rows, None]:
        if group and (row is None or row[1] != group[0].term_frequency):
            if len(group) > per_group:
                frontier.append((group[0].term_frequency, group[per_group].length))
            postings.extend(group[:per_group])
            group = []
        if row is not None:
            group.append(Posting(row[0], row[1], row[2]))
    return postings, frontier


async def postings_for(session: Session, target: SearchTarget, term: str, doc_ids: Sequence[int]) -> list[Posting]:
    """The term's postings among `doc_ids`, in `doc_id` order (exact lookups by key)."""
    if not _serves(target) or not doc_ids:
        return []
    dialect = session.dialect
    # A join with the ids, not `doc_id = ANY($3)`: a prepared (generic) plan tests a parameter array
    # linearly per row, and a candidate list can hold thousands of ids; here each is one key probe.
    rows = await session.rows(
        'SELECT p.doc_id, p.term_frequency, p.length '  # noqa: S608 (constant SQL fragments only)
        f'FROM {dialect.each(3, "bigint")} {dialect.join_in_order} postings p '
        'ON p.tenant_id = (SELECT tenant_id FROM tenants WHERE scope_key = $1) '
        'AND p.term_id = (SELECT term_id FROM terms WHERE term = $2) AND p.doc_id = value '
        'ORDER BY p.doc_id',
        scope_key(target.scope),
        term,
        dialect.array(sorted({int(doc_id) for doc_id in doc_ids})),
    )
    return [Posting(row[0], row[1], row[2]) for row in rows]
