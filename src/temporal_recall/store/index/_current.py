"""Which of a conversation's index members a default search sees: those on its current history.
More in docs/store.md ("Membership follows the head").
"""

from __future__ import annotations

from collections.abc import Sequence

from ..sql._session import Session

__all__ = ('MOVED_HEADS', 'follow_head', 'follow_heads')

_MARK = """
WITH RECURSIVE head(k) AS (
    SELECT head_key FROM conversations WHERE conv_key = $1 AND head_key IS NOT NULL
    UNION
    SELECT e.parent_key FROM head JOIN entries e ON e.entry_key = head.k WHERE e.parent_key IS NOT NULL
), seen(doc_id) AS (
    SELECT d.doc_id FROM head JOIN entries e ON e.entry_key = head.k
    JOIN documents d ON d.tenant_id = $2 AND d.content_hash = e.content_hash
    WHERE NOT e.unindexed
)
UPDATE conversation_documents SET branch_only = NOT branch_only
WHERE conv_key = $1 AND branch_only = (doc_id IN (SELECT doc_id FROM seen))
"""
"""Flip the rows whose mark is wrong: a member is `branch_only` unless an indexed entry its head reaches holds
it (a document is a tenant's content and speaker, so an entry holds every document of its content)."""

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

MOVED_HEADS = (
    'SELECT DISTINCT b.conv_key, c.tenant_id FROM conversation_branches b JOIN conversations c USING (conv_key)'
)
"""The conversations that can have members only on a branch: those keeping branches."""


async def follow_head(session: Session, conv_key: int, tenant_id: int) -> None:
    """Mark the conversation's members by whether its head reaches them, and count what it reaches.

    Called after a write that may have moved the head off the history it extended (a branch, a
    rewrite) or changed the kept branches: a walk of the current history and two statements, so
    a conversation keeping branches pays them on each write; one without pays nothing.
    """
    await session.run(_MARK, conv_key, tenant_id)
    await session.run(_COUNT, conv_key)


async def follow_heads(session: Session, conversations: Sequence[tuple[int, int]]) -> None:
    """`follow_head` for each `(conv_key, tenant_id)`: a rebuild's last step."""
    for conv_key, tenant_id in conversations:
        await follow_head(session, conv_key, tenant_id)
