"""Reads of the message log and the conversation rows (the write side is the engine's `_entries`).

Everything here runs on a connection inside the caller's transaction (see `Database.write` / `read`).
"""

from __future__ import annotations

from typing import Any, Literal, cast

from pydantic_ai.conversation_store import ConversationEntry, ConversationRecord

from temporal_recall.content import load_message

from . import _statements as statements
from ._postgres_db import Conn
from ._serialization import record_from_columns

__all__ = ('history', 'read_entry_row', 'read_record', 'read_records')

_NO_LIMIT = 2**62


_RECORD_SELECT = (
    'SELECT c.conversation_id, c.scope, h.entry_id, c.usage, c.deferred_tool_requests, c.forked_from, '
    'c.forked_at, c.revision, c.updated_at, c.format_version, '
    'ARRAY(SELECT e.entry_id FROM conversation_branches b JOIN entries e ON e.entry_key = b.entry_key '
    'WHERE b.conv_key = c.conv_key ORDER BY b.ordinal) '
    'FROM conversations c LEFT JOIN entries h ON h.entry_key = c.head_key '
)


def _record(row: Any) -> ConversationRecord:
    return record_from_columns(
        conversation_id=row[0],
        scope=row[1],
        head_id=row[2],
        usage=row[3],
        deferred_tool_requests=row[4],
        forked_from=row[5],
        forked_at=row[6],
        revision=row[7],
        updated_at=row[8],
        format_version=row[9],
        branches=list(row[10]),
    )


async def read_record(conn: Conn, conversation_id: str) -> ConversationRecord | None:
    row = await conn.fetchrow(_RECORD_SELECT + 'WHERE c.conversation_id = $1', conversation_id)
    return None if row is None else _record(row)


async def read_records(conn: Conn, *, scope_key: str | None, limit: int | None) -> list[ConversationRecord]:
    """Newest `updated_at` first; equal times in creation order, as `InMemoryConversationStore` lists them."""
    order = 'ORDER BY c.updated_order DESC, c.conv_key LIMIT $1'
    if scope_key is None:
        rows = await conn.fetch(_RECORD_SELECT + order, limit)
    else:
        rows = await conn.fetch(
            _RECORD_SELECT  # noqa: S608 (constant SQL fragments only; values are parameters)
            + 'WHERE c.tenant_id = (SELECT tenant_id FROM tenants WHERE scope_key = $2) '
            + order,
            limit,
            scope_key,
        )
    return [_record(row) for row in rows]


def _entry(row: Any) -> ConversationEntry:
    kind = cast(Literal['message'], row[2])
    return ConversationEntry(id=row[0], parent_id=row[1], message=load_message(row[3]), kind=kind)


async def read_entry_row(conn: Conn, entry_id: str) -> ConversationEntry | None:
    found = await conn.fetchrow(
        'SELECT e.entry_id, p.entry_id, e.kind, e.message FROM entries e '
        'LEFT JOIN entries p ON p.entry_key = e.parent_key WHERE e.entry_id = $1',
        entry_id,
    )
    return None if found is None else _entry(found)


async def history(conn: Conn, head_id: str, limit: int | None) -> list[ConversationEntry] | None:
    """The history ending at `head_id`, oldest first (only the last `limit`), in one query; `None` if no such entry."""
    rows = await conn.fetch(statements.HISTORY, head_id, _NO_LIMIT if limit is None else limit)
    if not rows:
        return None
    return [_entry(row) for row in rows]
