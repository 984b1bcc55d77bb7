"""Which of a conversation's index members a default search sees: those on its current history.
More in docs/store.md ("Membership follows the head").
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from ..sql._session import Dialect, Session

__all__ = ('BRANCHED', 'extend_head', 'follow_head', 'follow_heads')


@functools.lru_cache(maxsize=4)
def _mark_sql(dialect: Dialect) -> str:
    """Flip the rows whose mark is wrong: a member is `branch_only` unless an indexed entry its head reaches
    holds it (a document is a tenant's content and speaker, so an entry holds every document of its
    content). The walk drives: SQLite would otherwise scan the tenant's documents (`join_in_order`)."""
    return f"""
WITH RECURSIVE head(k) AS (
    SELECT head_key FROM conversations WHERE conv_key = $1 AND head_key IS NOT NULL
    UNION
    SELECT e.parent_key FROM head JOIN entries e ON e.entry_key = head.k WHERE e.parent_key IS NOT NULL
), seen(doc_id) AS (
    SELECT d.doc_id FROM head {dialect.join_in_order} entries e ON e.entry_key = head.k
    {dialect.join_in_order} documents d ON d.tenant_id = $2 AND d.content_hash = e.content_hash
    WHERE NOT e.unindexed
)
UPDATE conversation_documents SET branch_only = NOT branch_only
WHERE conv_key = $1 AND branch_only = (doc_id IN (SELECT doc_id FROM seen))
"""  # noqa: S608 (constant SQL fragments only; values are parameters)


_COUNT = """
UPDATE conversations SET
    document_count = (SELECT count(*) FROM conversation_documents m WHERE m.conv_key = $1 AND NOT m.branch_only),
    total_length = (
        SELECT coalesce(sum(d.length), 0) FROM conversation_documents m JOIN documents d ON d.doc_id = m.doc_id
        WHERE m.conv_key = $1 AND NOT m.branch_only
    )
WHERE conv_key = $1
"""
"""The conversation's counters over what a default search sees (its BM25 statistics)."""

BRANCHED = 'SELECT DISTINCT b.conv_key, c.tenant_id FROM conversation_branches b JOIN conversations c USING (conv_key)'
"""The conversations that can have members only on a branch: those keeping branches."""


async def follow_head(session: Session, conv_key: int, tenant_id: int) -> None:
    """Mark the conversation's members by whether its head reaches them, and count what it reaches.

    Called after a write that may have moved the head off the history it extended (a branch, a
    rewrite) or changed the kept branches: a walk of the current history and two statements.
    """
    await session.run(_mark_sql(session.dialect), conv_key, tenant_id)
    await session.run(_COUNT, conv_key)


async def extend_head(session: Session, conv_key: int, tenant_id: int, entry_keys: Sequence[int]) -> None:
    """After new entries extended the head (the history it had is still the current one): the members they
    hold that only a branch held before come back, and are counted. A probe of the marked rows alone."""
    dialect = session.dialect
    back = await session.rows(
        'UPDATE conversation_documents SET branch_only = NOT branch_only '  # noqa: S608
        f'WHERE conv_key = $1 AND branch_only AND doc_id IN (SELECT d.doc_id FROM {dialect.each(3, "bigint")} '
        f'{dialect.join_in_order} entries e ON e.entry_key = value {dialect.join_in_order} documents d '
        'ON d.tenant_id = $2 AND d.content_hash = e.content_hash WHERE NOT e.unindexed) RETURNING doc_id',
        conv_key,
        tenant_id,
        dialect.array(entry_keys),
    )
    if back:
        await session.run(
            'UPDATE conversations SET document_count = document_count + $1, total_length = total_length + '  # noqa: S608
            f'(SELECT coalesce(sum(length), 0) FROM documents WHERE doc_id {dialect.in_array(2, "bigint")}) '
            'WHERE conv_key = $3',
            len(back),
            dialect.array(int(row[0]) for row in back),
            conv_key,
        )


async def follow_heads(session: Session, conversations: Sequence[tuple[int, int]]) -> None:
    """`follow_head` for each `(conv_key, tenant_id)`: a rebuild's last step."""
    for conv_key, tenant_id in conversations:
        await follow_head(session, conv_key, tenant_id)
