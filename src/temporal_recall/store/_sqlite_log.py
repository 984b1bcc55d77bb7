"""Reads of the message log and the conversation rows (the write side is the engine's `_entries`).

Everything here runs inside a transaction the caller opened (see `Database.write` / `read`).
"""

from __future__ import annotations

import json
from typing import Literal, cast

from pydantic_ai.conversation_store import ConversationEntry, ConversationRecord

from temporal_recall.content import load_message

from . import _statements as statements
from ._serialization import record_from_columns
from ._sqlite_db import Database, Row
from ._statements import for_sqlite

__all__ = ('history', 'read_entry_row', 'read_record', 'read_records')

_NO_LIMIT = 2**62
_HISTORY = for_sqlite(statements.HISTORY)


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
            (json.dumps(list(branches)),),
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
