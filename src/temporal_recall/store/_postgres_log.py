"""Statements on the message log and the conversation rows, the write path's (`write_record`, `append`).

Reads and deletes are the engine's `_log`.

Everything here runs on a connection inside the caller's transaction (see `Database.write` / `read`).
The statements follow `_sqlite_log`, set-oriented where SQLite looped: a round trip to a server costs
far more than a call into an in-process library, so a chain of new entries is inserted in one statement
with keys allocated beforehand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from . import _statements as statements
from ._postgres_db import Conn, fetch_int
from ._rows import ConversationRow
from ._serialization import RecordColumns
from ._statements import record_values

__all__ = (
    'EntryRow',
    'entry_keys',
    'head_chain',
    'insert_conversation',
    'insert_entries',
    'lock_conversation',
    'max_entry_key',
    'update_conversation',
    'write_branches',
)


async def lock_conversation(
    conn: Conn, conversation_id: str, *, idempotency_key: str | None = None
) -> ConversationRow | None:
    """Lock the conversation's row until the transaction ends, then read it (`None` if there is none).

    Locking comes first, alone: a `FOR UPDATE` that waited for another writer returns that writer's
    version of the locked row, but rows it joins would come from the snapshot taken before the wait
    (and miss the head entry that writer added). The read after it is a new statement, so under
    READ COMMITTED it sees everything committed up to the moment the lock was granted. It also reads
    what an `idempotency_key` recorded, saving `append` a round trip.
    """
    conv_key = await conn.fetchval(
        'SELECT conv_key FROM conversations WHERE conversation_id = $1 FOR UPDATE', conversation_id
    )
    if conv_key is None:
        return None
    found = await conn.fetchrow(
        'SELECT c.tenant_id, c.scope, c.head_key, h.entry_id, coalesce(h.position, -1), c.revision, c.usage, '
        'ARRAY(SELECT b.entry_key FROM conversation_branches b WHERE b.conv_key = c.conv_key ORDER BY b.ordinal), '
        'w.length, wh.entry_id '
        'FROM conversations c LEFT JOIN entries h ON h.entry_key = c.head_key '
        'LEFT JOIN applied_writes w ON w.conv_key = c.conv_key AND w.idempotency_key = $2 '
        'LEFT JOIN entries wh ON wh.entry_key = w.head_key '
        'WHERE c.conv_key = $1',
        conv_key,
        idempotency_key,
    )
    assert found is not None
    return ConversationRow(
        conv_key=conv_key,
        tenant_id=found[0],
        scope=found[1],
        head_key=found[2],
        head_id=found[3],
        head_position=found[4],
        revision=found[5],
        usage=found[6],
        branch_keys=list(found[7]),
        applied=None if found[8] is None else (found[9], int(found[8])),
    )


async def max_entry_key(conn: Conn) -> int:
    return await fetch_int(conn, 'SELECT coalesce(max(entry_key), 0) FROM entries')


async def entry_keys(conn: Conn, entry_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
    """`entry_id -> (entry_key, position)` of the stored entries among `entry_ids`."""
    if not entry_ids:
        return {}
    rows = await conn.fetch(
        'SELECT entry_id, entry_key, position FROM entries WHERE entry_id = ANY($1::text[])', list(set(entry_ids))
    )
    return {row[0]: (int(row[1]), int(row[2])) for row in rows}


@dataclass(frozen=True, kw_only=True)
class EntryRow:
    entry_key: int
    entry_id: str
    parent_key: int | None
    position: int
    kind: str
    content_hash: bytes
    run_key: int | None
    message_json: str
    unindexed: bool = False
    """Kept out of the index by the application's summary rule (`PreparedMessage.unindexed`)."""


async def insert_entries(conn: Conn, rows: Sequence[EntryRow]) -> None:
    """Insert entries in one statement; parents may be among them (foreign keys are checked at statement end)."""
    if not rows:
        return
    await conn.execute(
        'INSERT INTO entries (entry_key, entry_id, parent_key, position, kind, content_hash, run_key, message, '
        'unindexed) SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::int[], $5::text[], $6::bytea[], '
        '$7::bigint[], $8::text[], $9::boolean[])',
        [row.entry_key for row in rows],
        [row.entry_id for row in rows],
        [row.parent_key for row in rows],
        [row.position for row in rows],
        [row.kind for row in rows],
        [row.content_hash for row in rows],
        [row.run_key for row in rows],
        [row.message_json for row in rows],
        [row.unindexed for row in rows],
    )


async def insert_conversation(
    conn: Conn, columns: RecordColumns, *, tenant_id: int, head_key: int | None, created_seq: int
) -> int:
    values = (columns.conversation_id, tenant_id, head_key, created_seq, *record_values(columns))
    return await fetch_int(conn, statements.INSERT_CONVERSATION, *values)


async def update_conversation(
    conn: Conn, conv_key: int, columns: RecordColumns, *, tenant_id: int, head_key: int | None
) -> None:
    await conn.execute(statements.UPDATE_CONVERSATION, conv_key, tenant_id, head_key, *record_values(columns))


async def write_branches(conn: Conn, conv_key: int, branch_keys: Sequence[int]) -> None:
    await conn.execute('DELETE FROM conversation_branches WHERE conv_key = $1', conv_key)
    if branch_keys:
        await conn.execute(
            'INSERT INTO conversation_branches (conv_key, ordinal, entry_key) '
            'SELECT $1, ordinality - 1, key FROM unnest($2::bigint[]) WITH ORDINALITY AS b(key, ordinality)',
            conv_key,
            list(branch_keys),
        )


async def head_chain(conn: Conn, head_key: int, min_position: int) -> list[tuple[int, int, bytes]]:
    """`(entry_key, position, content_hash)` of the head's chain from `min_position` up to the head, oldest first."""
    rows = await conn.fetch(statements.HEAD_CHAIN, head_key, max(min_position, 0))
    return [(int(row[0]), int(row[1]), bytes(row[2])) for row in rows if row[1] >= min_position]
