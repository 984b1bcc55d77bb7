"""Reading the message log and the conversation rows, and deleting a conversation: written once, on a `Session`.
More in docs/design/store.md.
"""

from __future__ import annotations

from typing import Literal, cast

from pydantic_ai.conversation_store import ConversationEntry, ConversationRecord

from temporal_recall.content import load_message

from ..index._membership import release_members
from ..protocol import ListingPosition
from ..sql._session import Row, Session
from . import _statements as statements
from ._columns import record_from_columns

__all__ = ('count_records', 'delete_conversation', 'history', 'read_entry_row', 'read_record', 'read_records')

_NO_LIMIT = 2**62
"""What an absent `limit` means: larger than any log, and a valid `LIMIT` on every backend."""

_BRANCHES = (
    'SELECT e.entry_id AS value FROM conversation_branches b JOIN entries e ON e.entry_key = b.entry_key '
    'WHERE b.conv_key = c.conv_key ORDER BY b.ordinal'
)


_RECORD_COLUMNS = {
    'conversation_id': 'c.conversation_id',
    'scope': 'c.scope',
    'head_id': 'h.entry_id',
    'usage': 'c.usage',
    'deferred_tool_requests': 'c.deferred_tool_requests',
    'forked_from': 'c.forked_from',
    'forked_at': 'c.forked_at',
    'revision': 'c.revision',
    'updated_at': 'c.updated_at',
    'format_version': 'c.format_version',
    'title': 'c.title',
    'metadata': 'c.metadata',
}
"""`record_from_columns`' arguments and the columns they are read from, in select order (branches last)."""


def _record_select(session: Session) -> str:
    return (
        f'SELECT {", ".join(_RECORD_COLUMNS.values())}, {session.dialect.array_of(_BRANCHES)} '  # noqa: S608
        'FROM conversations c LEFT JOIN entries h ON h.entry_key = c.head_key '
    )


def _record(session: Session, row: Row) -> ConversationRecord:
    width = len(_RECORD_COLUMNS)
    return record_from_columns(
        **dict(zip(_RECORD_COLUMNS, row[:width], strict=True)), branches=session.dialect.read_array(row[width])
    )


def _tenant(param: int) -> str:
    """The id of tenant `$param` (a scope key), looked up in the statement that reads its conversations."""
    return f'(SELECT tenant_id FROM tenants WHERE scope_key = ${param})'  # noqa: S608


def _limit(limit: int | None) -> int:
    """A `LIMIT` every backend binds: a limit beyond any log means all of it, as no limit does."""
    return _NO_LIMIT if limit is None else min(limit, _NO_LIMIT)


async def read_record(
    session: Session, conversation_id: str, *, scope_key: str | None = None
) -> ConversationRecord | None:
    """The conversation's record; with `scope_key`, only if it is that tenant's.

    The tenant is compared in the statement, so a conversation of another tenant costs what a missing
    one does: nothing is loaded or decoded for it.
    """
    if scope_key is None:
        row = await session.one(_record_select(session) + 'WHERE c.conversation_id = $1', conversation_id)
    else:
        where = f'WHERE c.conversation_id = $1 AND c.tenant_id = {_tenant(2)}'
        row = await session.one(_record_select(session) + where, conversation_id, scope_key)
    return None if row is None else _record(session, row)


def _listed(scope_key: str | None, after: ListingPosition | None, first: int) -> tuple[str, list[object]]:
    """The `WHERE` clause of the listing of tenant `scope_key` (every tenant with `None`) after `after`,
    and its parameters, numbered from `$first`.

    After a position means later in `updated_order DESC, conv_key`: the first condition bounds the
    index range, the second breaks ties by the key of the position's conversation, looked up within
    the listed tenant. A conversation that is gone (or another tenant's, which answers alike) breaks
    no tie: the conversations updated in the same microsecond are all listed again rather than skipped.
    """
    conditions: list[str] = []
    params: list[object] = []
    tenant = ''
    if scope_key is not None:
        tenant = _tenant(first)
        conditions.append(f'c.tenant_id = {tenant}')
        params.append(scope_key)
        first += 1
    if after is not None:
        order, conversation = f'${first}', f'${first + 1}'
        confined = f' AND p.tenant_id = {tenant}' if tenant else ''
        tie = f'(SELECT p.conv_key FROM conversations p WHERE p.conversation_id = {conversation}{confined})'  # noqa: S608
        conditions.append(
            f'c.updated_order <= {order} AND (c.updated_order < {order} OR c.conv_key > coalesce({tie}, -1))'
        )
        params += [after.updated_order, after.conversation_id]
    return (f'WHERE {" AND ".join(conditions)} ' if conditions else ''), params


async def read_records(
    session: Session, *, scope_key: str | None, limit: int | None, after: ListingPosition | None = None
) -> list[ConversationRecord]:
    """Newest `updated_at` first; equal times in creation order, as `InMemoryConversationStore` lists them.
    Of tenant `scope_key` (every tenant with `None`), after `after` (see `ListingPosition`)."""
    where, params = _listed(scope_key, after, first=2)
    order = 'ORDER BY c.updated_order DESC, c.conv_key LIMIT $1'
    rows = await session.rows(_record_select(session) + where + order, _limit(limit), *params)
    return [_record(session, row) for row in rows]


async def count_records(session: Session, *, scope_key: str | None, after: ListingPosition | None = None) -> int:
    """How many conversations `read_records` would list without a limit."""
    where, params = _listed(scope_key, after, first=1)
    return int(await session.value(f'SELECT count(*) FROM conversations c {where}', *params))  # noqa: S608


def _entry(row: Row) -> ConversationEntry:
    kind = cast(Literal['message'], row[2])
    return ConversationEntry(id=row[0], parent_id=row[1], message=load_message(row[3]), kind=kind)


async def read_entry_row(session: Session, entry_id: str) -> ConversationEntry | None:
    found = await session.one(
        'SELECT e.entry_id, p.entry_id, e.kind, e.message FROM entries e '
        'LEFT JOIN entries p ON p.entry_key = e.parent_key WHERE e.entry_id = $1',
        entry_id,
    )
    return None if found is None else _entry(found)


async def history(session: Session, head_id: str, limit: int | None) -> list[ConversationEntry] | None:
    """The history ending at `head_id`, oldest first (only the last `limit`), in one query; `None` if no such entry."""
    rows = await session.rows(statements.HISTORY, head_id, _limit(limit))
    if not rows:
        return None
    return [_entry(row) for row in rows]


async def delete_conversation(session: Session, conv_key: int) -> None:
    """Delete the conversation's rows, its index membership (`release_members`), and the entries only it reaches.

    A concurrent write that starts referencing a doomed entry makes the final delete fail its foreign
    key check; the store retries the whole delete, which then keeps that entry.
    """
    doomed = [int(row[0]) for row in await session.rows(statements.UNREACHABLE, conv_key)]
    await release_members(session, conv_key)
    for statement in statements.DELETE_CONVERSATION_ROWS:
        await session.run(statement, conv_key)
    if doomed:
        each = session.dialect.each(1, 'bigint')
        # Another conversation may have recorded a supersession of an entry it no longer reaches.
        await session.run(
            f'DELETE FROM superseded_entries WHERE entry_key IN (SELECT value FROM {each})',  # noqa: S608
            session.dialect.array(doomed),
        )
        # Descending keys (`UNREACHABLE`): children before parents.
        await session.run(
            f'DELETE FROM entries WHERE entry_key IN (SELECT value FROM {session.dialect.each(1, "bigint")})',  # noqa: S608
            session.dialect.array(doomed),
        )
