"""`ImpactReader` on PostgreSQL: scope-wide reads in impact order, so a search skips most of a common term.

Same answers as `_sqlite_reader`'s impact reads (see `temporal_recall._recall._ranked_by_impact` for how
the search uses them): document frequencies, the head of each term-frequency group of a term's
postings, and exact lookups for candidates. They serve a whole tenant only; a conversation or run
target gets `None` and the search reads whole posting lists. Each read is one statement, the target
resolved inside it, and walks the `postings_by_impact` index (migration 2).
"""

from __future__ import annotations

from collections.abc import Sequence

from ._postgres_db import Conn
from ._protocol import Posting, SearchTarget
from ._serialization import scope_key

__all__ = ('document_frequencies', 'postings_for', 'top_postings')


def _serves(target: SearchTarget) -> bool:
    return target.conversation_id is None and target.run_id is None and target.role is None


async def document_frequencies(conn: Conn, target: SearchTarget, terms: Sequence[str]) -> dict[str, int] | None:
    """How many of the tenant's documents hold each term; `None` for a target this path does not serve."""
    if not _serves(target):
        return None
    rows = await conn.fetch(
        'WITH tenant AS (SELECT tenant_id FROM tenants WHERE scope_key = $1) '
        'SELECT t.term, (SELECT s.document_count FROM term_documents s '
        'WHERE s.tenant_id = tenant.tenant_id AND s.term_id = t.term_id) '
        'FROM tenant LEFT JOIN (unnest($2::text[]) AS q(term) JOIN terms t ON t.term = q.term) ON true',
        scope_key(target.scope),
        list(dict.fromkeys(terms)),
    )
    if not rows:
        return None  # No such tenant.
    return {row[0]: int(row[1]) for row in rows if row[0] is not None and row[1]}


_TOP = """
WITH RECURSIVE
    tenant AS (SELECT tenant_id FROM tenants WHERE scope_key = $1),
    term AS (SELECT term_id FROM terms WHERE term = $2),
    groups(tf) AS (
        SELECT max(term_frequency) FROM postings
        WHERE tenant_id = (SELECT tenant_id FROM tenant) AND term_id = (SELECT term_id FROM term)
        UNION ALL
        SELECT (SELECT max(term_frequency) FROM postings
                WHERE tenant_id = (SELECT tenant_id FROM tenant) AND term_id = (SELECT term_id FROM term)
                AND term_frequency < groups.tf)
        FROM groups WHERE groups.tf IS NOT NULL
    )
SELECT head.doc_id, head.term_frequency, head.length
FROM groups CROSS JOIN LATERAL (
    SELECT doc_id, term_frequency, length FROM postings
    WHERE tenant_id = (SELECT tenant_id FROM tenant) AND term_id = (SELECT term_id FROM term)
    AND term_frequency = groups.tf
    ORDER BY length, doc_id LIMIT $3
) AS head
WHERE groups.tf IS NOT NULL
ORDER BY head.term_frequency DESC, head.length, head.doc_id
"""
"""The frequency groups by a loose index scan (one descent of the impact index per distinct term
frequency), then `$3` rows of each, shortest first: one statement instead of one per group."""


async def top_postings(
    conn: Conn, target: SearchTarget, term: str, per_group: int
) -> tuple[list[Posting], list[tuple[int, int]]] | None:
    """The `per_group` shortest documents of each term-frequency group, and where each unfinished group stopped.

    Returns `(postings, frontier)` as `_sqlite_reader.top_postings` does: `frontier` holds
    `(term_frequency, length)` for every group with more documents, all at least that long.
    """
    if not _serves(target):
        return None
    found = await conn.fetchrow(
        'SELECT (SELECT tenant_id FROM tenants WHERE scope_key = $1), (SELECT term_id FROM terms WHERE term = $2)',
        scope_key(target.scope),
        term,
    )
    if found is None or found[0] is None:
        return None
    if found[1] is None:
        return [], []
    postings: list[Posting] = []
    frontier: list[tuple[int, int]] = []
    group: list[Posting] = []
    for row in [*await conn.fetch(_TOP, scope_key(target.scope), term, per_group + 1), None]:
        if group and (row is None or row[1] != group[0].term_frequency):
            if len(group) > per_group:
                frontier.append((group[0].term_frequency, group[per_group].length))
            postings.extend(group[:per_group])
            group = []
        if row is not None:
            group.append(Posting(row[0], row[1], row[2]))
    return postings, frontier


async def postings_for(conn: Conn, target: SearchTarget, term: str, doc_ids: Sequence[int]) -> list[Posting]:
    """The term's postings among `doc_ids` (exact lookups by key)."""
    if not _serves(target) or not doc_ids:
        return []
    # A join with the ids, not `doc_id = ANY($3)`: a prepared (generic) plan tests a parameter array
    # linearly per row, and a candidate list can hold thousands of ids; here each is one key probe.
    rows = await conn.fetch(
        'SELECT p.doc_id, p.term_frequency, p.length FROM unnest($3::bigint[]) AS wanted(doc_id) '
        'JOIN postings p ON p.tenant_id = (SELECT tenant_id FROM tenants WHERE scope_key = $1) '
        'AND p.term_id = (SELECT term_id FROM terms WHERE term = $2) AND p.doc_id = wanted.doc_id '
        'ORDER BY p.doc_id',
        scope_key(target.scope),
        term,
        sorted({int(doc_id) for doc_id in doc_ids}),
    )
    return [Posting(row[0], row[1], row[2]) for row in rows]
