"""Statements on the message log and the conversation rows, shared by `write_record`, `append` and deletes.

Everything here runs inside a transaction the caller opened (see `Database.write` / `read`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, cast

from pydantic_ai.conversation_store import ConversationEntry, ConversationRecord

from temporal_recall.content import load_message

from . import _statements as statements
from ._rows import ConversationRow
from ._serialization import PreparedMessage, RecordColumns, record_from_columns
from ._sqlite_db import Database, Row
from ._sqlite_index import json_keys, release_members
from ._statements import for_sqlite, record_values

__all__ = (
    'conversation_row',
    'delete_conversation',
    'entry_key_of',
    'head_chain',
    'history',
    'insert_conversation',
    'insert_entry',
    'max_entry_key',
    'read_entry_row',
    'read_record',
    'read_records',
    'update_conversation',
    'write_branches',
)

_NO_LIMIT = 2**62
_HISTORY = for_sqlite(statements.HISTORY)
_HEAD_CHAIN = for_sqlite(statements.HEAD_CHAIN)
_UNREACHABLE = for_sqlite(statements.UNREACHABLE)
_INSERT_CONVERSATION = for_sqlite(statements.INSERT_CONVERSATION)
_UPDATE_CONVERSATION = for_sqlite(statements.UPDATE_CONVERSATION)
_DELETE_CONVERSATION_ROWS = [for_sqlite(statement) for statement in statements.DELETE_CONVERSATION_ROWS]


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


_RECORD_SELECT = (
    'SELECT c.conv_key, c.conversation_id, c.scope, h.entry_id, c.usage, c.deferred_tool_requests, '
    'c.forked_from, c.forked_at, c.revision, c.updated_at, c.format_version '
    'FROM conversations c LEFT JOIN entries h ON h.entry_key = c.head_key '
)


async def _records(db: Database, rows: list[Row]) -> list[ConversationRecord]:
    branches: dict[int, list[str]] = {row[0]: [] for row in rows}
    if rows:
        for conv_key, entry_id in await db.rows(
            'SELECT b.conv_key, e.entry_id FROM conversation_branches b JOIN entries e ON e.entry_key = b.entry_key '
            'WHERE b.conv_key IN (SELECT value FROM json_each(?)) ORDER BY b.conv_key, b.ordinal',
            (json_keys(branches),),
        ):
            branches[conv_key].append(entry_id)
    return [
        record_from_columns(
            conversation_id=row[1],
            scope=row[2],
            head_id=row[3],
            branches=branches[row[0]],
            usage=row[4],
            deferred_tool_requests=row[5],
            forked_from=row[6],
            forked_at=row[7],
            revision=row[8],
            updated_at=row[9],
            format_version=row[10],
        )
        for row in rows
    ]


async def read_record(db: Database, conversation_id: str) -> ConversationRecord | None:
    rows = await db.rows(_RECORD_SELECT + 'WHERE c.conversation_id = ?', (conversation_id,))
    records = await _records(db, rows)
    return records[0] if records else None


async def read_records(db: Database, *, scope_key: str | None, limit: int | None) -> list[ConversationRecord]:
    """Newest `updated_at` first; equal times in creation order, as `InMemoryConversationStore` lists them."""
    limit_value = -1 if limit is None else limit
    if scope_key is None:
        rows = await db.rows(_RECORD_SELECT + 'ORDER BY c.updated_order DESC, c.conv_key LIMIT ?', (limit_value,))
    else:
        rows = await db.rows(
            _RECORD_SELECT  # noqa: S608 (constant SQL fragments only; values are parameters)
            + 'WHERE c.tenant_id = (SELECT tenant_id FROM tenants WHERE scope_key = ?) '
            'ORDER BY c.updated_order DESC, c.conv_key LIMIT ?',
            (scope_key, limit_value),
        )
    return await _records(db, rows)


def _entry(row: Row) -> ConversationEntry:
    kind = cast(Literal['message'], row[2])
    return ConversationEntry(id=row[0], parent_id=row[1], message=load_message(row[3]), kind=kind)


async def read_entry_row(db: Database, entry_id: str) -> ConversationEntry | None:
    found = await db.one(
        'SELECT e.entry_id, p.entry_id, e.kind, e.message FROM entries e '
        'LEFT JOIN entries p ON p.entry_key = e.parent_key WHERE e.entry_id = ?',
        (entry_id,),
    )
    return None if found is None else _entry(found)


async def history(db: Database, head_id: str, limit: int | None) -> list[ConversationEntry] | None:
    """The history ending at `head_id`, oldest first (only the last `limit`), in one query; `None` if no such entry."""
    rows = await db.rows(_HISTORY, (head_id, _NO_LIMIT if limit is None else limit))
    if not rows:
        return None
    return [_entry(row) for row in rows]


async def head_chain(db: Database, head_key: int, min_position: int) -> list[tuple[int, int, bytes]]:
    """`(entry_key, position, content_hash)` of the head's chain from `min_position` up to the head, oldest first."""
    rows = await db.rows(_HEAD_CHAIN, (head_key, max(min_position, 0)))
    return [(int(row[0]), int(row[1]), bytes(row[2])) for row in rows if row[1] >= min_position]


async def delete_conversation(db: Database, conv_key: int) -> None:
    """Delete the conversation's row, index membership, applied writes and the entries only it reaches."""
    doomed = [int(row[0]) for row in await db.rows(_UNREACHABLE, (conv_key,))]
    await release_members(db, conv_key)
    for statement in _DELETE_CONVERSATION_ROWS:
        await db.run(statement, (conv_key,))
    # Descending keys: children before parents, so each statement leaves the parent links intact.
    for start in range(0, len(doomed), 500):
        await db.run(
            'DELETE FROM entries WHERE entry_key IN (SELECT value FROM json_each(?))',
            (json_keys(doomed[start : start + 500]),),
        )
