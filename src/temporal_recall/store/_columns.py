"""`BlockReader`: scope-wide reads of whole posting lists as arrays, so a search scores a common term at C speed.

Used by `temporal_recall.search._plan._ranked_by_columns` for a target spanning a whole tenant, where
a common term's posting list can hold most of the store: its blocks are read in one range scan and
decoded by numpy in one pass (`_blocks.columns_of`), no row or tuple per posting. A conversation,
run or role target gets `None` and the search reads posting lists (`_reader.postings`). Every read is
confined to the target's tenant: its id is resolved from the trusted scope in the statement that
reads the term ids, and every block read is keyed by it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._blocks import read_blocks
from ._protocol import PostingColumns, SearchTarget
from ._serialization import scope_key
from ._session import Session

__all__ = ('document_frequencies', 'posting_columns')


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


async def _keys(session: Session, target: SearchTarget, terms: Sequence[str]) -> tuple[int, dict[str, int]] | None:
    """The target's tenant id and the term ids of `terms`; `None` for a target this path does not serve."""
    if not _serves(target):
        return None
    dialect = session.dialect
    rows = await session.rows(
        'SELECT (SELECT tenant_id FROM tenants WHERE scope_key = $1), t.term, t.term_id '  # noqa: S608 (constant SQL)
        f'FROM (SELECT 1) AS one LEFT JOIN terms t ON t.term {dialect.in_array(2, "text")}',
        scope_key(target.scope),
        dialect.array(dict.fromkeys(terms)),
    )
    if not rows or rows[0][0] is None:
        return None
    return int(rows[0][0]), {str(row[1]): int(row[2]) for row in rows if row[1] is not None}


async def posting_columns(
    session: Session, target: SearchTarget, terms: Sequence[str]
) -> dict[str, PostingColumns] | None:
    """Each term's posting list in the tenant as arrays; `None` for a target this path does not serve."""
    keys = await _keys(session, target, terms)
    if keys is None:
        return None
    tenant_id, term_ids = keys
    found = await read_blocks(session, tenant_id, list(term_ids.values()))
    return {term: found[term_id] for term, term_id in term_ids.items() if term_id in found}
