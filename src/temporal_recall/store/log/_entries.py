"""The write side of the message log and the conversation rows, over a `Session`, for `log._append` and `log._write`.
More in docs/design/store.md.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from pydantic_ai.conversation_store import ConversationConflict, ConversationEntry

from ..index._terms import Member, PreparedMessage
from ..sql._bulk import Batch, allocate_keys, insert_rows, insert_then
from ..sql._schema import CONVERSATION_ID_UNIQUE
from ..sql._session import Dialect, Row, Session, Statement
from . import _statements as statements
from ._columns import RecordColumns
from ._rows import ChainEntry, ConversationRow
from ._statements import record_values
from ._tenants import intern_runs

__all__ = (
    'conversation_row',
    'entry_keys',
    'head_chain',
    'insert_chain',
    'insert_conversation',
    'insert_entries',
    'integrity_violation',
    'lost_creation_race',
    'max_entry_key',
    'update_conversation',
    'write_branches',
)

_ENTRY_COLUMNS = (
    ('entry_key', 'bigint'),
    ('entry_id', 'text'),
    ('parent_key', 'bigint'),
    ('position', 'int'),
    ('kind', 'text'),
    ('content_hash', 'bytea'),
    ('run_key', 'bigint'),
    ('message', 'text'),
    ('unindexed', 'boolean'),
)


def integrity_violation(error: BaseException) -> bool:
    """Whether `error` is the server refusing a row a concurrent writer made invalid: a unique or a
    foreign key violation (SQLSTATE 23505, 23503), which only a backend with concurrent writers raises
    inside a write whose rules were checked."""
    return getattr(error, 'sqlstate', None) in ('23505', '23503')


def lost_creation_race(error: BaseException) -> bool:
    """Whether `error` is a concurrent transaction having created the same conversation first."""
    return getattr(error, 'sqlstate', None) == '23505' and (
        getattr(error, 'constraint_name', None) == CONVERSATION_ID_UNIQUE
    )


async def conversation_row(
    session: Session,
    conversation_id: str,
    *,
    idempotency_key: str | None = None,
    fence_key: str | None = None,
    lock_tenant: bool = False,
    chain_from: int | None = None,
    runs: Collection[str] = (),
    terms: Collection[str] = (),
) -> ConversationRow | None:
    """Lock the conversation's row until the transaction ends (where rows are locked), then read it.

    Locking comes first, alone: a `FOR UPDATE` that waited for another writer returns that writer's
    version of the locked row, but rows it joins would come from the snapshot taken before the wait
    (and miss the head entry that writer added). The read after it is a new statement, so under
    READ COMMITTED it sees everything committed up to the moment the lock was granted.

    The read also takes what `append` needs next, saving it round trips: what an `idempotency_key`
    recorded, the highest attempt a `fence_key` recorded, the tenant's shared lock (`lock_tenant`:
    the lock every write takes right after its row's, `_tenants.lock_tenants`), and where statements
    are round trips the head's chain from position `chain_from` (`head_chain`; the conversation's
    own entries, which its locked row keeps from changing) and the keys of the stored `runs` and
    `terms` among those the write may intern (`_bulk.intern`).
    """
    dialect = session.dialect
    conv_key = await session.value(
        f'SELECT conv_key FROM conversations WHERE conversation_id = $1{dialect.for_update}',  # noqa: S608
        conversation_id,
    )
    if conv_key is None:
        return None
    sql, params = _row_read(dialect, idempotency_key, fence_key, lock_tenant, chain_from, runs, terms)
    found = await session.one(sql, conv_key, *params)
    assert found is not None
    return ConversationRow(
        conv_key=int(conv_key),
        tenant_id=found[0],
        scope=found[1],
        head_key=found[2],
        head_id=found[3],
        head_position=found[4],
        revision=found[5],
        usage=found[6],
        branch_keys=[int(key) for key in dialect.read_array(found[7])],
        applied=None if found[8] is None else (found[9], int(found[8])),
        fence_attempt=None if found[10] is None else int(found[10]),
        chain=None if found[12] is None else _chain(dialect.read_array(found[12]), chain_from),
        known_runs=_interned(dialect.read_array(found[13]) if found[13] is not None else ()),
        known_terms=_interned(dialect.read_array(found[14]) if found[14] is not None else ()),
    )


def _row_read(
    dialect: Dialect,
    idempotency_key: str | None,
    fence_key: str | None,
    lock_tenant: bool,
    chain_from: int | None,
    runs: Collection[str],
    terms: Collection[str],
) -> tuple[str, list[Any]]:
    """`conversation_row`'s read of a locked row (`$1`, its `conv_key`) and what it takes along, with
    its parameters after the first; a column not asked for (or not worth it on this backend) is `NULL`."""
    branches = dialect.array_of(
        'SELECT b.entry_key AS value FROM conversation_branches b WHERE b.conv_key = c.conv_key ORDER BY b.ordinal'
    )
    params: list[Any] = [idempotency_key]
    fence, fenced = 'NULL', ''
    if fence_key is not None:
        params.append(fence_key)
        fence = 'f.length'
        fenced = f'LEFT JOIN applied_writes f ON f.conv_key = c.conv_key AND f.idempotency_key = ${len(params) + 1} '
    lock = (dialect.lock_tenant_in('c.tenant_id') if lock_tenant else None) or 'NULL'
    chain = 'NULL'
    if chain_from is not None and dialect.statements_are_round_trips:
        params.append(chain_from)
        chain = dialect.array_of(
            statements.head_chain('c.head_key', f'${len(params) + 1}', 'ROW(e.entry_key, e.position, e.content_hash)')
        )
    interned = {'runs': 'NULL', 'terms': 'NULL'}
    for table, values in (('runs', runs), ('terms', terms)):
        if values and dialect.statements_are_round_trips:
            params.append(dialect.array(values))
            column, key = ('term', 'term_id') if table == 'terms' else ('run_id', 'run_key')
            match = dialect.in_array(len(params) + 1, 'text')
            interned[table] = dialect.array_of(
                f'SELECT ROW(x.{column}, x.{key}) FROM {table} x WHERE x.{column} {match}'  # noqa: S608
            )
    sql = (
        'SELECT c.tenant_id, c.scope, c.head_key, h.entry_id, coalesce(h.position, -1), c.revision, c.usage, '  # noqa: S608
        f'{branches}, w.length, wh.entry_id, {fence}, {lock}, {chain}, {interned["runs"]}, {interned["terms"]} '
        'FROM conversations c LEFT JOIN entries h ON h.entry_key = c.head_key '
        'LEFT JOIN applied_writes w ON w.conv_key = c.conv_key AND w.idempotency_key = $2 '
        f'LEFT JOIN entries wh ON wh.entry_key = w.head_key {fenced}'
        'WHERE c.conv_key = $1'
    )
    return sql, params


async def max_entry_key(session: Session) -> int:
    return int(await session.value('SELECT coalesce(max(entry_key), 0) FROM entries'))


async def entry_keys(session: Session, entry_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
    """`entry_id -> (entry_key, position)` of the stored entries among `entry_ids`."""
    if not entry_ids:
        return {}
    dialect = session.dialect
    rows = await session.rows(
        f'SELECT entry_id, entry_key, position FROM entries WHERE entry_id {dialect.in_array(1, "text")}',  # noqa: S608
        dialect.array(set(entry_ids)),
    )
    return {str(row[0]): (int(row[1]), int(row[2])) for row in rows}


async def head_chain(session: Session, head_key: int, min_position: int) -> list[ChainEntry]:
    """The head's chain from `min_position` up to the head, oldest first."""
    return _chain(await session.rows(statements.HEAD_CHAIN, head_key, max(min_position, 0)), min_position)


def _interned(rows: Iterable[Row]) -> dict[str, int]:
    return {str(row[0]): int(row[1]) for row in rows}


def _chain(rows: Iterable[Row], min_position: int | None) -> list[ChainEntry]:
    """`head_chain`'s rows (`entry_key, position, content_hash`) from `min_position` on."""
    return [
        ChainEntry(int(row[0]), int(row[1]), bytes(row[2]))
        for row in rows
        if min_position is None or row[1] >= min_position
    ]


async def insert_chain(
    session: Session,
    items: Sequence[PreparedMessage],
    ids: Sequence[str],
    parent_key: int | None,
    parent_position: int,
    known_runs: Mapping[str, int] | None = None,
    then: Statement | None = None,
    locks: Statement | None = None,
) -> tuple[list[Member], list[Row]]:
    """Insert `items` (with entry ids `ids`) as a chain of messages after `parent_key`; the members they add,
    and the rows of `then` (a read sent with the insert: `_bulk.insert_then`). `known_runs`: run keys this
    transaction read already (`_bulk.intern`). `locks`: the content locks, taken before the keys are
    allocated, with them (`_bulk.allocate_keys`), unless a run is new: then before its insert too, so
    that nothing this write inserts comes before them, as without the fold."""
    if locks is not None and any(item.run_id is not None and item.run_id not in (known_runs or {}) for item in items):
        await session.rows(locks[0], *locks[1])
        locks = None
    runs = await intern_runs(session, (item.run_id for item in items), known_runs)
    keys = await allocate_keys(session, 'entries', len(items), locks)
    rows: list[tuple[Any, ...]] = []
    members: list[Member] = []
    for index, (item, key, entry_id) in enumerate(zip(items, keys, ids, strict=True)):
        position = parent_position + 1 + index
        run_key = None if item.run_id is None else runs[item.run_id]
        rows.append(_entry_row(key, entry_id, parent_key, position, 'message', item, run_key))
        members.append(
            Member(entry_key=key, position=position, run_key=run_key, content_hash=item.content_hash, prepared=item)
        )
        parent_key = key
    if then is None:
        await insert_rows(session, 'entries', _ENTRY_COLUMNS, rows)
        return members, []
    return members, await insert_then(session, [Batch('entries', _ENTRY_COLUMNS, rows)], then[0], *then[1])


async def insert_entries(
    session: Session,
    entries: Sequence[ConversationEntry],
    prepared: Sequence[PreparedMessage],
    conflict: ConversationConflict,
) -> dict[str, Member]:
    """Insert the entries not stored yet, in order, in one batch; the index members they would add, by entry id.

    Entry ids are immutable: a stored one (or a repeat in this batch) is never rewritten. A parent
    that is not stored was released by a concurrent delete: raise `conflict`.
    """
    known = await entry_keys(
        session, [*(entry.id for entry in entries), *(e.parent_id for e in entries if e.parent_id is not None)]
    )
    todo = [(entry, item) for entry, item in zip(entries, prepared, strict=True) if entry.id not in known]
    runs = await intern_runs(session, (item.run_id for _, item in todo))
    keys = iter(await allocate_keys(session, 'entries', len(todo)))
    rows: list[tuple[Any, ...]] = []
    members: dict[str, Member] = {}
    for entry, item in todo:
        if entry.id in known:
            continue
        parent = None if entry.parent_id is None else known.get(entry.parent_id)
        if entry.parent_id is not None and parent is None:
            raise conflict
        key, position = next(keys), 0 if parent is None else parent[1] + 1
        run_key = None if item.run_id is None else runs[item.run_id]
        known[entry.id] = (key, position)
        rows.append(
            _entry_row(key, entry.id, None if parent is None else parent[0], position, entry.kind, item, run_key)
        )
        members[entry.id] = Member(
            entry_key=key, position=position, run_key=run_key, content_hash=item.content_hash, prepared=item
        )
    await insert_rows(session, 'entries', _ENTRY_COLUMNS, rows)
    return members


def _entry_row(
    key: int,
    entry_id: str,
    parent_key: int | None,
    position: int,
    kind: str,
    item: PreparedMessage,
    run_key: int | None,
) -> tuple[Any, ...]:
    """The values of `_ENTRY_COLUMNS` for one entry."""
    return (key, entry_id, parent_key, position, kind, item.content_hash, run_key, item.message_json, item.unindexed)


async def insert_conversation(
    session: Session, columns: RecordColumns, *, tenant_id: int, head_key: int | None, created_seq: int
) -> int:
    values = (columns.conversation_id, tenant_id, head_key, created_seq, *record_values(columns))
    return int(await session.value(statements.INSERT_CONVERSATION, *values))


async def update_conversation(
    session: Session, conv_key: int, columns: RecordColumns, *, tenant_id: int, head_key: int | None
) -> None:
    await session.run(statements.UPDATE_CONVERSATION, conv_key, tenant_id, head_key, *record_values(columns))


async def write_branches(session: Session, conv_key: int, branch_keys: Sequence[int]) -> None:
    await session.run('DELETE FROM conversation_branches WHERE conv_key = $1', conv_key)
    await insert_rows(
        session,
        'conversation_branches',
        (('conv_key', 'bigint'), ('ordinal', 'int'), ('entry_key', 'bigint')),
        [(conv_key, ordinal, entry_key) for ordinal, entry_key in enumerate(branch_keys)],
    )
