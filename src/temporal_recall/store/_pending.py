"""Interim bridges: the engine entry points the write path and the search reads will provide, over today's drivers.

TODO(merge): delete this module. Each function has the signature of the engine function that
replaces it (`append`, `write_record`, `rebuild_index`, `release_members`, `lock_tenants` from the
write path's engine modules; `index_stats`, `postings`, `documents`, `document_frequencies`,
`top_postings`, `postings_for` from the engine reader), so rewiring is changing the imports in
`_store`, `_log` and `_migrations`. Until then each dispatches to the backend's own module, giving
today's SQLite statements the `rows(sql, params)` surface they were written against, on the
connection thread, and today's PostgreSQL statements the session's asyncpg connection.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, cast

from pydantic_ai.conversation_store import ConversationConflict, ConversationEntry, ConversationRecord

from ._protocol import AppendRequest, AppendResult, DocumentRow, IndexStats, Posting, SearchTarget
from ._serialization import PreparedMessage, RecordColumns
from ._session import Backend, Session

# Imports are inside the functions: the PostgreSQL modules import asyncpg, which a SQLite-only install lacks.


def _sqlite(session: Session) -> Any:
    from ._sqlite_db import SqliteSession, _ThreadReads  # pyright: ignore[reportPrivateUsage]

    return _ThreadReads(cast(SqliteSession, session)._connection)  # pyright: ignore[reportPrivateUsage]


def _conn(session: Session) -> Any:
    from ._postgres_db import PostgresSession

    return cast(PostgresSession, session).conn


def _on_sqlite(dialect_owner: Session | Backend) -> bool:
    return dialect_owner.dialect.name == 'sqlite'


async def append(backend: Backend, request: AppendRequest) -> AppendResult:
    if _on_sqlite(backend):
        from . import _sqlite_db, _sqlite_write

        return await _sqlite_write.append(cast(_sqlite_db.Database, backend), request)
    from . import _postgres_db, _postgres_write

    return await _postgres_write.append(cast(_postgres_db.Database, backend), request)


async def write_record(
    backend: Backend,
    record: ConversationRecord,
    new_entries: Sequence[ConversationEntry],
    prepared: Sequence[PreparedMessage],
    columns: RecordColumns,
    expected_revision: str | None,
) -> None:
    if _on_sqlite(backend):
        from . import _sqlite_db, _sqlite_write

        db = cast(_sqlite_db.Database, backend)
        return await _sqlite_write.write_record(db, record, new_entries, prepared, columns, expected_revision)
    from asyncpg import exceptions as pg

    from . import _postgres_write

    conflict = ConversationConflict(record.conversation_id)

    async def body(session: Session) -> None:
        try:
            await _postgres_write.write_record(
                _conn(session), record, new_entries, prepared, columns, expected_revision
            )
        except (pg.UniqueViolationError, pg.ForeignKeyViolationError) as error:
            # Created by a concurrent writer, or an entry it names was released by a concurrent delete.
            raise conflict from error

    await backend.run_write(body)


async def rebuild_index(session: Session, progress: Callable[[int, int], None] | None = None) -> int:
    if _on_sqlite(session):
        from . import _sqlite_index

        return await _sqlite_index.rebuild_index(_sqlite(session), progress)
    from . import _postgres_index

    return await _postgres_index.rebuild_index(_conn(session), progress)


async def release_members(session: Session, conv_key: int) -> None:
    if _on_sqlite(session):
        from . import _sqlite_index

        return await _sqlite_index.release_members(_sqlite(session), conv_key)
    from . import _postgres_index

    return await _postgres_index.release_members(_conn(session), conv_key)


async def lock_tenants(session: Session, tenant_ids: Iterable[int]) -> None:
    if _on_sqlite(session):
        return  # One writer at a time: nothing to lock.
    from . import _postgres_index

    await _postgres_index.lock_tenants(_conn(session), tenant_ids)


async def index_stats(session: Session, target: SearchTarget) -> IndexStats | None:
    if _on_sqlite(session):
        from . import _sqlite_reader

        return await _sqlite_reader.index_stats(_sqlite(session), target)
    from . import _postgres_reader

    return await _postgres_reader.index_stats(_conn(session), target)


async def postings(session: Session, target: SearchTarget, terms: Sequence[str]) -> dict[str, list[Posting]]:
    if _on_sqlite(session):
        from . import _sqlite_reader

        return await _sqlite_reader.postings(_sqlite(session), target, terms)
    from . import _postgres_reader

    return await _postgres_reader.postings(_conn(session), target, terms)


async def documents(
    session: Session,
    target: SearchTarget,
    doc_ids: Sequence[int],
    *,
    context: int = 0,
    limit: int | None = None,
    exclude_run_id: str | None = None,
) -> list[DocumentRow]:
    if _on_sqlite(session):
        from . import _sqlite_reader as reader
    else:
        from . import _postgres_reader as reader
    handle = _sqlite(session) if _on_sqlite(session) else _conn(session)
    return await reader.documents(handle, target, doc_ids, context=context, limit=limit, exclude_run_id=exclude_run_id)


async def document_frequencies(session: Session, target: SearchTarget, terms: Sequence[str]) -> dict[str, int] | None:
    if _on_sqlite(session):
        from . import _sqlite_reader

        return await _sqlite_reader.document_frequencies(_sqlite(session), target, terms)
    from . import _postgres_impact

    return await _postgres_impact.document_frequencies(_conn(session), target, terms)


async def top_postings(
    session: Session, target: SearchTarget, term: str, per_group: int
) -> tuple[list[Posting], list[tuple[int, int]]] | None:
    if _on_sqlite(session):
        from . import _sqlite_reader

        return await _sqlite_reader.top_postings(_sqlite(session), target, term, per_group)
    from . import _postgres_impact

    return await _postgres_impact.top_postings(_conn(session), target, term, per_group)


async def postings_for(session: Session, target: SearchTarget, term: str, doc_ids: Sequence[int]) -> list[Posting]:
    if _on_sqlite(session):
        from . import _sqlite_reader

        return await _sqlite_reader.postings_for(_sqlite(session), target, term, doc_ids)
    from . import _postgres_impact

    return await _postgres_impact.postings_for(_conn(session), target, term, doc_ids)
