"""What a default search leaves out of a conversation: what a later attempt of the same run's request replaced.

Recall is for what the model's context no longer holds, so a default search sees every message a
conversation stored, on its head and on every branch it left, except a retraction: the first answer of
a retried model request, describing tool calls that never ran. The store records it when it happens
(`record_supersession`) and marks the memberships it hides; a conversation without one pays one probe.
docs/design/store.md (store/index/_superseded.py) has the rules.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from ..sql._session import Dialect, Session

__all__ = (
    'SUPERSEDING',
    'extend_head',
    'follow_supersessions',
    'follow_supersessions_of',
    'record_supersession',
)


@functools.lru_cache(maxsize=4)
def _mark_sql(dialect: Dialect) -> str:
    """Flip the rows whose mark is wrong: a member is `superseded` when an entry at or below a superseded
    entry, off the head's history, holds it, and no other entry of the conversation does.

    `reach` is every entry of the conversation (its head's and kept branches' histories), `head` the
    current history, `below` each recorded superseded entry with everything under it. The walks drive
    (`join_in_order`): SQLite would otherwise scan the tenant's documents.
    """
    return f"""
WITH RECURSIVE head(k) AS (
    SELECT head_key FROM conversations WHERE conv_key = $1 AND head_key IS NOT NULL
    UNION
    SELECT e.parent_key FROM head JOIN entries e ON e.entry_key = head.k WHERE e.parent_key IS NOT NULL
), reach(k) AS (
    SELECT k FROM head
    UNION SELECT entry_key FROM conversation_branches WHERE conv_key = $1
    UNION
    SELECT e.parent_key FROM reach JOIN entries e ON e.entry_key = reach.k WHERE e.parent_key IS NOT NULL
), below(k) AS (
    SELECT entry_key FROM superseded_entries WHERE conv_key = $1
    UNION
    SELECT e.entry_key FROM below JOIN entries e ON e.parent_key = below.k
), hidden(k) AS (
    SELECT k FROM below EXCEPT SELECT k FROM head
), hidden_docs(doc_id) AS (
    SELECT d.doc_id FROM hidden {dialect.join_in_order} entries e ON e.entry_key = hidden.k
    {dialect.join_in_order} documents d ON d.tenant_id = $2 AND d.content_hash = e.content_hash
    WHERE NOT e.unindexed
), seen(doc_id) AS (
    SELECT d.doc_id FROM reach {dialect.join_in_order} entries e ON e.entry_key = reach.k
    {dialect.join_in_order} documents d ON d.tenant_id = $2 AND d.content_hash = e.content_hash
    WHERE NOT e.unindexed AND reach.k NOT IN (SELECT k FROM hidden)
)
UPDATE conversation_documents SET superseded = NOT superseded
WHERE conv_key = $1
AND superseded = (doc_id NOT IN (SELECT doc_id FROM hidden_docs) OR doc_id IN (SELECT doc_id FROM seen))
"""  # noqa: S608 (constant SQL fragments only; values are parameters)


_COUNT = """
UPDATE conversations SET
    document_count = (SELECT count(*) FROM conversation_documents m WHERE m.conv_key = $1 AND NOT m.superseded),
    total_length = (
        SELECT coalesce(sum(d.length), 0) FROM conversation_documents m JOIN documents d ON d.doc_id = m.doc_id
        WHERE m.conv_key = $1 AND NOT m.superseded
    )
WHERE conv_key = $1
"""
"""The conversation's counters over what a default search sees (its BM25 statistics)."""

SUPERSEDING = 'SELECT DISTINCT s.conv_key, c.tenant_id FROM superseded_entries s JOIN conversations c USING (conv_key)'
"""The conversations that can have superseded members: those where a later attempt replaced an earlier one."""

_HAS_SUPERSESSION = 'SELECT 1 FROM superseded_entries WHERE conv_key = $1 LIMIT 1'


async def record_supersession(session: Session, conv_key: int, tenant_id: int, replaced_key: int) -> None:
    """Record that a later attempt of the same run's same request replaced the entries from `replaced_key`
    down (the first entry the earlier attempt wrote below their common attach point), and mark what only
    they hold. Called by the append that branched away from them, in its transaction."""
    await session.run(
        'INSERT INTO superseded_entries (conv_key, entry_key) VALUES ($1, $2) ON CONFLICT DO NOTHING',
        conv_key,
        replaced_key,
    )
    await _mark(session, conv_key, tenant_id)


async def follow_supersessions(session: Session, conv_key: int, tenant_id: int) -> None:
    """After a write that moved the conversation's head or changed its kept branches: the marks again.

    Only a conversation with a recorded supersession can have marks (the head may have moved onto or
    off superseded entries); any other pays one primary-key probe.
    """
    if await session.value(_HAS_SUPERSESSION, conv_key) is None:
        return
    await _mark(session, conv_key, tenant_id)


async def _mark(session: Session, conv_key: int, tenant_id: int) -> None:
    await session.run(_mark_sql(session.dialect), conv_key, tenant_id)
    await session.run(_COUNT, conv_key)


async def extend_head(session: Session, conv_key: int, tenant_id: int, entry_keys: Sequence[int]) -> None:
    """After new entries extended the head (the history it had is still the current one): the members they
    hold that were superseded before come back, and are counted. A probe of the marked rows alone."""
    dialect = session.dialect
    back = await session.rows(
        'UPDATE conversation_documents SET superseded = NOT superseded '  # noqa: S608
        f'WHERE conv_key = $1 AND superseded AND doc_id IN (SELECT d.doc_id FROM {dialect.each(3, "bigint")} '
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


async def follow_supersessions_of(session: Session, conversations: Sequence[tuple[int, int]]) -> None:
    """`follow_supersessions` for each `(conv_key, tenant_id)`: a rebuild's last step."""
    for conv_key, tenant_id in conversations:
        await _mark(session, conv_key, tenant_id)
