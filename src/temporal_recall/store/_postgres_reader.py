"""`IndexReader` over the PostgreSQL index: stats, postings and document rows for a `SearchTarget`.

Answers are identical to `_sqlite_reader`'s (same rows, same order), which is what makes
`search_history` rank the same hits with the same scores on both backends. As there, every query
enforces the target in SQL (tenant, conversation membership, run) and a conversation outside the
target's scope is indistinguishable from a missing one. Round trips cost more than on SQLite, so
the target is resolved inside the query that uses it and all query terms are fetched in one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from ._occurrences import page_rows
from ._postgres_db import Conn
from ._protocol import DocumentRow, IndexStats, Posting, SearchTarget
from ._serialization import document_rows, scope_key

__all__ = ('documents', 'index_stats', 'postings')


@dataclass(frozen=True, kw_only=True)
class _Target:
    tenant_id: int
    conv_key: int | None
    run_key: int | None
    """Only meaningful when `filtered`."""
    filtered: bool
    document_count: int
    total_length: int


async def _resolve(conn: Conn, target: SearchTarget) -> _Target | None:
    """The target's keys; `None` when nothing can match (unknown tenant, conversation or run)."""
    row = await conn.fetchrow(
        'SELECT t.tenant_id, t.document_count, t.total_length, c.conv_key, c.document_count, c.total_length, '
        '(SELECT r.run_key FROM runs r WHERE r.run_id = $3) '
        'FROM tenants t LEFT JOIN conversations c ON c.conversation_id = $2 AND c.tenant_id = t.tenant_id '
        'WHERE t.scope_key = $1',
        scope_key(target.scope),
        target.conversation_id,
        target.run_id,
    )
    if row is None:
        return None
    filtered = target.run_id is not None
    if filtered and row[6] is None:
        return None
    if target.conversation_id is None:
        return _Target(
            tenant_id=row[0],
            conv_key=None,
            run_key=row[6],
            filtered=filtered,
            document_count=row[1],
            total_length=row[2],
        )
    if row[3] is None:
        return None
    return _Target(
        tenant_id=row[0], conv_key=row[3], run_key=row[6], filtered=filtered, document_count=row[4], total_length=row[5]
    )


async def _conversation_exists(conn: Conn, target: SearchTarget) -> bool:
    if target.conversation_id is None:
        return True
    found = await conn.fetchval(
        'SELECT 1 FROM conversations c JOIN tenants t ON t.tenant_id = c.tenant_id '
        'WHERE c.conversation_id = $1 AND t.scope_key = $2',
        target.conversation_id,
        scope_key(target.scope),
    )
    return found is not None


async def index_stats(conn: Conn, target: SearchTarget) -> IndexStats | None:
    resolved = await _resolve(conn, target)
    if resolved is None:
        # Fail closed: a conversation outside the scope is reported exactly like a missing one.
        return IndexStats(document_count=0, total_length=0) if await _conversation_exists(conn, target) else None
    if not resolved.filtered:
        return IndexStats(document_count=resolved.document_count, total_length=resolved.total_length)
    if resolved.conv_key is not None:
        row = await conn.fetchrow(
            'SELECT count(*), coalesce(sum(d.length), 0) FROM conversation_documents cd '
            'JOIN documents d ON d.doc_id = cd.doc_id WHERE cd.run_key = $1 AND cd.conv_key = $2',
            resolved.run_key,
            resolved.conv_key,
        )
    else:
        row = await conn.fetchrow(
            'SELECT count(*), coalesce(sum(d.length), 0) '
            'FROM (SELECT DISTINCT doc_id FROM conversation_documents WHERE run_key = $1) AS run '
            'JOIN documents d ON d.doc_id = run.doc_id WHERE d.tenant_id = $2',
            resolved.run_key,
            resolved.tenant_id,
        )
    assert row is not None
    return IndexStats(document_count=int(row[0]), total_length=int(row[1]))


_TARGET = (
    'WITH tenant AS (SELECT tenant_id, document_count FROM tenants WHERE scope_key = $1), '
    'conv AS (SELECT conv_key, document_count * 4 <= (SELECT document_count FROM tenant) AS small '
    'FROM conversations WHERE conversation_id = $2 AND tenant_id = (SELECT tenant_id FROM tenant)), '
    'run AS (SELECT run_key FROM runs WHERE run_id = $3) '
)
"""Resolves a target inside the query that uses it ($1 scope key, $2 conversation id, $3 run id): one
round trip instead of two. A part that does not exist resolves to NULL, which matches no row, so an
unknown tenant, conversation or run answers nothing, exactly as a failed `_resolve` does."""


def _target_params(target: SearchTarget) -> tuple[object, ...]:
    return (scope_key(target.scope), target.conversation_id, target.run_id)


_MEMBERS = 'FROM conversation_documents cd WHERE cd.conv_key = (SELECT conv_key FROM conv) '
_OF_RUN = 'AND cd.run_key = (SELECT run_key FROM run) '
_HIT = 'SELECT p.doc_id, p.term_frequency, p.length '
_TERM = 'p.tenant_id = (SELECT tenant_id FROM tenant) AND p.term_id = t.term_id '
_PROBE = 'CROSS JOIN LATERAL (' + _HIT + 'FROM postings p WHERE ' + _TERM + 'AND p.doc_id = cd.doc_id OFFSET 0) AS p '
_SCAN = 'JOIN postings p ON ' + _TERM + 'AND p.doc_id = cd.doc_id '
_RUN_DOCS = 'AND p.doc_id IN (SELECT doc_id FROM conversation_documents WHERE run_key = (SELECT run_key FROM run)) '


def _postings_sql(target: SearchTarget) -> str:
    """One row per term ($4) with its posting list as three `doc_id`-ordered arrays, the target enforced in SQL.

    Arrays rather than a row per posting: a common term has tens of thousands of postings, and
    decoding three integer arrays costs far less than building as many row objects. Each term's list
    is aggregated in its own subquery ordered by `doc_id`, which the postings key already delivers,
    so no sort runs (an `ORDER BY` inside `array_agg` would sort every aggregate's input again).
    A role filter ($5) keeps the postings of the documents of that role.

    In one conversation there are two ways to find a term's postings, and which is cheap depends on
    sizes the planner cannot see (the term id comes from a join, so it estimates every posting list
    at the average length). When the conversation holds at most a quarter of its tenant's documents,
    the query probes the postings key once per (member, term) — cost bounded by the conversation's
    size, however common the term; otherwise it scans the term's posting list and joins the
    membership. The choice is made in the query (`small`, from the stored counters) and the other
    branch is never executed.
    """
    if target.conversation_id is None:
        hits = _HIT + 'FROM postings p WHERE ' + _TERM + (_RUN_DOCS if target.run_id is not None else '')
    else:
        members = _MEMBERS + (_OF_RUN if target.run_id is not None else '')
        hits = (
            'SELECT * FROM ('  # noqa: S608 (constant SQL fragments only; values are parameters)
            + _HIT
            + 'FROM (SELECT cd.doc_id '
            + members
            + 'AND (SELECT small FROM conv)) AS cd '
            + _PROBE
            + 'UNION ALL '
            + _HIT
            + 'FROM (SELECT cd.doc_id '
            + members
            + 'AND NOT (SELECT small FROM conv)) AS cd '
            + _SCAN
            + ') AS p'
        )
    if target.role is not None:
        hits = _HIT + 'FROM (' + hits + ') AS p JOIN documents d ON d.doc_id = p.doc_id WHERE d.role = $5'
    return (
        _TARGET  # noqa: S608 (constant SQL fragments only; values are parameters)
        + 'SELECT q.n, x.doc_ids, x.frequencies, x.lengths '
        'FROM unnest($4::text[]) WITH ORDINALITY AS q(term, n) JOIN terms t ON t.term = q.term '
        'CROSS JOIN LATERAL (SELECT array_agg(h.doc_id) AS doc_ids, array_agg(h.term_frequency) AS frequencies, '
        'array_agg(h.length) AS lengths FROM (' + hits + ' ORDER BY p.doc_id) AS h) AS x '
        'WHERE x.doc_ids IS NOT NULL'
    )


def _in_doc_order(doc_ids: list[int], *columns: list[int]) -> tuple[list[int], ...]:
    """The arrays as fetched, or re-sorted by `doc_id` if a plan ever delivered them in another order.

    Aggregating an ordered subquery keeps its order in practice, but PostgreSQL does not promise it;
    checking costs one C-speed pass (`sorted` of a sorted list), reordering only happens if needed.
    """
    if doc_ids == sorted(doc_ids):
        return (doc_ids, *columns)
    order = sorted(range(len(doc_ids)), key=doc_ids.__getitem__)
    return tuple([values[index] for index in order] for values in (doc_ids, *columns))


_new_posting = tuple.__new__
"""Builds a `Posting` from a `(doc_id, term_frequency, length)` tuple without a Python-level call."""


async def postings(conn: Conn, target: SearchTarget, terms: Sequence[str]) -> dict[str, list[Posting]]:
    wanted = list(dict.fromkeys(terms))
    if not wanted:
        return {}
    found: dict[str, list[Posting]] = {}
    role = () if target.role is None else (target.role,)
    sql = _postings_sql(target)
    for n, doc_ids, frequencies, lengths in await conn.fetch(sql, *_target_params(target), wanted, *role):
        columns = _in_doc_order(doc_ids, frequencies, lengths)
        found[wanted[n - 1]] = list(map(_new_posting, repeat(Posting), zip(*columns, strict=True)))
    return {term: found[term] for term in wanted if term in found}


_ROW_COLUMNS = (
    'SELECT cd.doc_id, cd.entry_key, cd.position, cd.run_key, r.run_id, e.entry_id, e.message, '
    'c.conversation_id, c.conv_key, cd.occurrences, d.content_hash '
    'FROM conversation_documents cd JOIN documents d ON d.doc_id = cd.doc_id '
    'JOIN entries e ON e.entry_key = cd.entry_key '
    'JOIN conversations c ON c.conv_key = cd.conv_key LEFT JOIN runs r ON r.run_key = cd.run_key '
)


_OF_CONVERSATION = 'WHERE cd.conv_key = (SELECT conv_key FROM conv) AND cd.doc_id = ANY($4::bigint[])'
_OF_TENANT = (
    # The document must be the tenant's, and so (documents being per tenant) is every conversation holding it.
    'WHERE d.tenant_id = (SELECT tenant_id FROM tenant) '
    'AND c.tenant_id = (SELECT tenant_id FROM tenant) AND cd.doc_id = ANY($4::bigint[])'
)

_CHAIN = """
WITH RECURSIVE chain(k) AS (
    SELECT head_key FROM conversations WHERE conv_key = $1 AND head_key IS NOT NULL
    UNION ALL
    SELECT e.parent_key FROM chain JOIN entries e ON e.entry_key = chain.k WHERE e.parent_key IS NOT NULL
)
SELECT e.content_hash, e.entry_key, e.position, e.run_key, r.run_id, e.entry_id, e.message
FROM chain JOIN entries e ON e.entry_key = chain.k LEFT JOIN runs r ON r.run_key = e.run_key
WHERE NOT e.unindexed AND e.content_hash = ANY($2::bytea[])
"""
"""`_occurrences.ChainQuery`: the conversation's current history, walked up from its head."""


def _documents_sql(target: SearchTarget) -> str:
    sql = _TARGET + _ROW_COLUMNS + (_OF_CONVERSATION if target.conversation_id is not None else _OF_TENANT)
    if target.run_id is not None:
        sql += ' AND cd.run_key = (SELECT run_key FROM run)'
    if target.role is not None:
        sql += ' AND d.role = $5'
    return sql + ' ORDER BY cd.entry_key, cd.conv_key'


async def documents(
    conn: Conn,
    target: SearchTarget,
    doc_ids: Sequence[int],
    *,
    context: int = 0,
    limit: int | None = None,
    exclude_run_id: str | None = None,
) -> list[DocumentRow]:
    if not doc_ids:
        return []
    ids = [int(doc_id) for doc_id in doc_ids]
    role = () if target.role is None else (target.role,)
    rows = await conn.fetch(_documents_sql(target), *_target_params(target), ids, *role)
    run_key = None
    if target.run_id is not None:
        run_key = await conn.fetchval('SELECT run_key FROM runs WHERE run_id = $1', target.run_id)

    async def chain(conv_key: int, hashes: Sequence[bytes]) -> list[Any]:
        return await conn.fetch(_CHAIN, conv_key, list(hashes))

    async def read_context(sql: str, hits: Sequence[tuple[int, int, int]]) -> list[Any]:
        keys, convs, depths = (list(column) for column in zip(*hits, strict=True))
        return await conn.fetch(_HITS + sql, keys, convs, depths)

    page = await page_rows(ids, rows, chain, run_key=run_key, exclude_run_id=exclude_run_id, limit=limit)
    return await document_rows(page, read_context, context)


_HITS = (
    'WITH RECURSIVE hits(k, conv, pos, n) AS (SELECT e.entry_key, w.conv, e.position, w.n '
    'FROM unnest($1::bigint[], $2::bigint[], $3::integer[]) AS w(k, conv, n) JOIN entries e ON e.entry_key = w.k),'
)
"""The context query's points, as three arrays (entry keys, conversation keys, depths); the rule is `_context`'s."""
