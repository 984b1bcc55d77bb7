"""Statements that read the same on every backend, written once.

They use PostgreSQL's numbered placeholders (`$1`, `$2`) and standard SQL only (`CAST`, not `::`);
the SQLite session spells the placeholders its own way (`sqlite._connection.sqlite_spelling`).
"""

from __future__ import annotations

from typing import Any

from ._columns import RecordColumns

__all__ = (
    'APPLIED_COLUMNS',
    'DELETE_CONVERSATION_ROWS',
    'HEAD_CHAIN',
    'HISTORY',
    'INSERT_CONVERSATION',
    'UNREACHABLE',
    'UPDATE_CONVERSATION',
    'head_chain',
    'record_values',
)

HISTORY = """
WITH RECURSIVE chain(k, n) AS (
    SELECT entry_key, CAST(1 AS BIGINT) FROM entries WHERE entry_id = $1
    UNION ALL
    SELECT e.parent_key, chain.n + 1 FROM chain JOIN entries e ON e.entry_key = chain.k
    WHERE e.parent_key IS NOT NULL AND chain.n < $2
)
SELECT e.entry_id, p.entry_id, e.kind, e.message
FROM chain JOIN entries e ON e.entry_key = chain.k LEFT JOIN entries p ON p.entry_key = e.parent_key
ORDER BY chain.n DESC
"""
"""The history ending at entry `$1`, oldest first, at most `$2` entries: one recursive query."""


def head_chain(head: str, min_position: str, columns: str) -> str:
    """The chain ending at entry key `head` (an SQL expression), down to position `min_position`: `columns`
    of its entries (`e`), oldest first. One recursive query, written once for `HEAD_CHAIN` and the
    conversation row's read that folds it in (`_entries.conversation_row`)."""
    return f"""
WITH RECURSIVE chain(k) AS (
    SELECT CAST({head} AS BIGINT)
    UNION ALL
    SELECT e.parent_key FROM chain JOIN entries e ON e.entry_key = chain.k
    WHERE e.parent_key IS NOT NULL AND e.position > {min_position}
)
SELECT {columns} FROM chain JOIN entries e ON e.entry_key = chain.k
ORDER BY e.position
"""  # noqa: S608 (fixed expressions and placeholders)


HEAD_CHAIN = head_chain('$1', '$2', 'e.entry_key, e.position, e.content_hash')
"""`(entry_key, position, content_hash)` of the chain ending at entry key `$1`, down to position `$2`."""

UNREACHABLE = """
WITH RECURSIVE
    tips(k) AS (
        SELECT head_key FROM conversations WHERE conv_key = $1 AND head_key IS NOT NULL
        UNION SELECT entry_key FROM conversation_branches WHERE conv_key = $1
    ),
    reach(k) AS (
        SELECT k FROM tips
        UNION SELECT e.parent_key FROM reach JOIN entries e ON e.entry_key = reach.k WHERE e.parent_key IS NOT NULL
    ),
    seeds(k) AS (
        SELECT c.head_key FROM conversations c WHERE c.conv_key <> $1 AND c.head_key IN (SELECT k FROM reach)
        UNION SELECT b.entry_key FROM conversation_branches b
            WHERE b.conv_key <> $1 AND b.entry_key IN (SELECT k FROM reach)
        UNION SELECT child.parent_key FROM entries child
            WHERE child.parent_key IN (SELECT k FROM reach) AND child.entry_key NOT IN (SELECT k FROM reach)
    ),
    kept(k) AS (
        SELECT k FROM seeds
        UNION SELECT e.parent_key FROM kept JOIN entries e ON e.entry_key = kept.k WHERE e.parent_key IS NOT NULL
    )
SELECT k FROM reach EXCEPT SELECT k FROM kept ORDER BY k DESC
"""
"""Entries only conversation `$1` reaches: its reachable set minus the ancestors of anything another
record's head or branch points at, and of any child outside the set (entries another history built on).
Descending keys: children before parents, so deleting them in order leaves every parent link intact."""

DELETE_CONVERSATION_ROWS = (
    'DELETE FROM superseded_entries WHERE conv_key = $1',
    'DELETE FROM applied_writes WHERE conv_key = $1',
    'DELETE FROM conversation_branches WHERE conv_key = $1',
    'DELETE FROM conversations WHERE conv_key = $1',
)
"""What a deleted conversation's own rows are, after its index membership is released."""


def record_values(columns: RecordColumns) -> tuple[Any, ...]:
    """The values of a record's columns, in the order `INSERT_CONVERSATION` and `UPDATE_CONVERSATION` take them."""
    return (
        columns.scope,
        columns.revision,
        columns.updated_at,
        columns.updated_order,
        columns.usage,
        columns.deferred_tool_requests,
        columns.forked_from,
        columns.forked_at,
        columns.format_version,
    )


INSERT_CONVERSATION = (
    'INSERT INTO conversations (conversation_id, tenant_id, head_key, created_seq, scope, revision, '
    'updated_at, updated_order, usage, deferred_tool_requests, forked_from, forked_at, format_version) '
    'VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING conv_key'
)
"""Parameters: conversation id, tenant id, head key, created_seq, then `record_values`."""

UPDATE_CONVERSATION = (
    'UPDATE conversations SET tenant_id = $2, head_key = $3, scope = $4, revision = $5, updated_at = $6, '
    'updated_order = $7, usage = $8, deferred_tool_requests = $9, forked_from = $10, forked_at = $11, '
    'format_version = $12 WHERE conv_key = $1'
)
"""Parameters: conversation key, tenant id, head key, then `record_values`."""

APPLIED_COLUMNS = (
    ('conv_key', 'bigint'),
    ('idempotency_key', 'text'),
    ('head_key', 'bigint'),
    ('length', 'int'),
    ('stored', 'int'),
)
"""The row of `applied_writes` recording what an idempotency key's append did, returned again to a retry
of the same key (inserted with the head's move, `sql._bulk.insert_then`)."""
