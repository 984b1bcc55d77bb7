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

from collections.abc import Sequence
from typing import Any, cast

from ._protocol import DocumentRow, IndexStats, Posting, SearchTarget
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
