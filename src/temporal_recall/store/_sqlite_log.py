"""Statements on the message log and the conversation rows, the write path's (`write_record`, `append`).

Reads and deletes are the engine's `_log`.

Everything here runs inside a transaction the caller opened (see `Database.write` / `read`).
"""

from __future__ import annotations

from collections.abc import Sequence

from . import _statements as statements
from ._rows import ConversationRow
from ._serialization import PreparedMessage, RecordColumns
from ._sqlite_db import Database
from ._statements import for_sqlite, record_values

__all__ = (
    'conversation_row',
    'entry_key_of',
    'head_chain',
    'insert_conversation',
    'insert_entry',
    'max_entry_key',
    'update_conversation',
    'write_branches',
)

_HEAD_CHAIN = for_sqlite(statements.HEAD_CHAIN)
_INSERT_CONVERSATION = for_sqlite(statements.INSERT_CONVERSATION)
_UPDATE_CONVERSATION = for_sqlite(statements.UPDATE_CONVERSATION)


async def conversation_row(
    db: Database, conversation_id: str, *, idempotency_key: str | None = None
) -> ConversationRow | None:
    """The conversation's row, with what `idempotency_key` recorded if it was applied."""
    found = await db.one(
        'SELECT c.conv_key, c.tenant_id, c.scope, c.head_key, h.entry_id, coalesce(h.position, -1), c.revision, '
        'c.usage, w.length, wh.entry_id '
        'FROM conversations c LEFT JOIN entries h ON h.entry_key = c.head_key '
        'LEFT JOIN applied_writes w ON w.conv_key = c.conv_key AND w.idempotency_key = ? '
        'LEFT JOIN entries wh ON wh.entry_key = w.head_key '
        'WHERE c.conversation_id = ?',
        (idempotency_key, conversation_id),
    )
    if found is None:
        return None
    branch_rows = await db.rows(
        'SELECT entry_key FROM conversation_branches WHERE conv_key = ? ORDER BY ordinal', (found[0],)
    )
    return ConversationRow(
        conv_key=found[0],
        tenant_id=found[1],
        scope=found[2],
        head_key=found[3],
        head_id=found[4],
        head_position=found[5],
        revision=found[6],
        usage=found[7],
        branch_keys=[row[0] for row in branch_rows],
        applied=None if found[8] is None else (found[9], int(found[8])),
    )


async def max_entry_key(db: Database) -> int:
    return int(await db.value('SELECT coalesce(max(entry_key), 0) FROM entries'))


async def entry_key_of(db: Database, entry_id: str) -> tuple[int, int] | None:
    """`(entry_key, position)` of a stored entry."""
    found = await db.one('SELECT entry_key, position FROM entries WHERE entry_id = ?', (entry_id,))
    return None if found is None else (int(found[0]), int(found[1]))


async def insert_entry(
    db: Database,
    *,
    entry_id: str,
    parent_key: int | None,
    position: int,
    kind: str,
    prepared: PreparedMessage,
    run_key: int | None,
) -> int:
    return int(
        await db.value(
            'INSERT INTO entries (entry_id, parent_key, position, kind, content_hash, run_key, message, unindexed) '
            'VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING entry_key',
            (
                entry_id,
                parent_key,
                position,
                kind,
                prepared.content_hash,
                run_key,
                prepared.message_json,
                prepared.unindexed,
            ),
        )
    )


async def insert_conversation(
    db: Database, columns: RecordColumns, *, tenant_id: int, head_key: int | None, created_seq: int
) -> int:
    values = (columns.conversation_id, tenant_id, head_key, created_seq, *record_values(columns))
    return int(await db.value(_INSERT_CONVERSATION, values))


async def update_conversation(
    db: Database, conv_key: int, columns: RecordColumns, *, tenant_id: int, head_key: int | None
) -> None:
    await db.run(_UPDATE_CONVERSATION, (conv_key, tenant_id, head_key, *record_values(columns)))


async def write_branches(db: Database, conv_key: int, branch_keys: Sequence[int]) -> None:
    await db.run('DELETE FROM conversation_branches WHERE conv_key = ?', (conv_key,))
    await db.many(
        'INSERT INTO conversation_branches (conv_key, ordinal, entry_key) VALUES (?, ?, ?)',
        [(conv_key, ordinal, entry_key) for ordinal, entry_key in enumerate(branch_keys)],
    )


async def head_chain(db: Database, head_key: int, min_position: int) -> list[tuple[int, int, bytes]]:
    """`(entry_key, position, content_hash)` of the head's chain from `min_position` up to the head, oldest first."""
    rows = await db.rows(_HEAD_CHAIN, (head_key, max(min_position, 0)))
    return [(int(row[0]), int(row[1]), bytes(row[2])) for row in rows if row[1] >= min_position]
