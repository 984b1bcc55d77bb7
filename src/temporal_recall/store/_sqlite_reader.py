"""`IndexReader` over the SQLite index: stats, postings and document rows for a `SearchTarget`.

Every query enforces the target in SQL (tenant, conversation membership, run), so a row outside the
target is never read, let alone filtered afterwards. A conversation target must exist with exactly
the target's scope (`None` included); otherwise the reader behaves as if it did not exist.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from ._occurrences import page_rows
from ._protocol import DocumentRow, IndexStats, Posting, SearchTarget
from ._serialization import document_rows, scope_key
from ._sqlite_db import Database, Row

__all__ = ('documents', 'index_stats', 'postings')


@dataclass(frozen=True, kw_only=True)
class _Target:
    tenant_id: int
    conv_key: int | None
    conversation_id: str | None
    run_key: int | None
    """Only meaningful when `filtered`."""
    filtered: bool
    role: str | None = None
    document_count: int = 0
    total_length: int = 0
    tenant_document_count: int = 0


async def _resolve(db: Database, target: SearchTarget) -> _Target | None:
    """The target's keys; `None` when nothing can match (unknown tenant, conversation or run)."""
    tenant = await db.one(
        'SELECT tenant_id, document_count, total_length FROM tenants WHERE scope_key = ?', (scope_key(target.scope),)
    )
    if tenant is None:
        return None
    run_key: int | None = None
    if target.run_id is not None:
        run_key = await db.value('SELECT run_key FROM runs WHERE run_id = ?', (target.run_id,))
        if run_key is None:
            return None
    if target.conversation_id is None:
        return _Target(
            tenant_id=tenant[0],
            conv_key=None,
            conversation_id=None,
            run_key=run_key,
            filtered=target.run_id is not None,
            role=target.role,
            document_count=tenant[1],
            total_length=tenant[2],
        )
    conversation = await db.one(
        'SELECT conv_key, document_count, total_length FROM conversations WHERE conversation_id = ? AND tenant_id = ?',
        (target.conversation_id, tenant[0]),
    )
    if conversation is None:
        return None
    return _Target(
        tenant_id=tenant[0],
        conv_key=conversation[0],
        conversation_id=target.conversation_id,
        run_key=run_key,
        filtered=target.run_id is not None,
        role=target.role,
        document_count=conversation[1],
        total_length=conversation[2],
        tenant_document_count=tenant[1],
    )


async def _conversation_exists(db: Database, target: SearchTarget) -> bool:
    if target.conversation_id is None:
        return True
    found = await db.one(
        'SELECT 1 FROM conversations c JOIN tenants t ON t.tenant_id = c.tenant_id '
        'WHERE c.conversation_id = ? AND t.scope_key = ?',
        (target.conversation_id, scope_key(target.scope)),
    )
    return found is not None


async def index_stats(db: Database, target: SearchTarget) -> IndexStats | None:
    resolved = await _resolve(db, target)
    if resolved is None:
        # Fail closed: a conversation outside the scope is reported exactly like a missing one.
        return IndexStats(document_count=0, total_length=0) if await _conversation_exists(db, target) else None
    if not resolved.filtered:
        return IndexStats(document_count=resolved.document_count, total_length=resolved.total_length)
    if resolved.conv_key is not None:
        row = await db.one(
            'SELECT count(*), coalesce(sum(d.length), 0) FROM conversation_documents cd '
            'JOIN documents d ON d.doc_id = cd.doc_id WHERE cd.run_key = ? AND cd.conv_key = ?',
            (resolved.run_key, resolved.conv_key),
        )
    else:
        row = await db.one(
            'SELECT count(*), coalesce(sum(d.length), 0) '
            'FROM (SELECT DISTINCT doc_id FROM conversation_documents WHERE run_key = ?) AS run '
            'JOIN documents d ON d.doc_id = run.doc_id WHERE d.tenant_id = ?',
            (resolved.run_key, resolved.tenant_id),
        )
    assert row is not None
    return IndexStats(document_count=row[0], total_length=row[1])


def _postings_query(resolved: _Target) -> tuple[str, tuple[object, ...], tuple[object, ...]]:
    """The per-term query: `(sql, params before the term id, params after it)`, the role filter applied."""
    sql, before, after = _target_postings_query(resolved)
    if resolved.role is None:
        return sql, before, after
    filtered = (
        'SELECT p.doc_id, p.term_frequency, p.length FROM ('  # noqa: S608 (constant SQL fragments only)
        + sql
        + ') AS p JOIN documents d ON d.doc_id = p.doc_id WHERE d.role = ? ORDER BY p.doc_id'
    )
    return filtered, before, (*after, resolved.role)


def _target_postings_query(resolved: _Target) -> tuple[str, tuple[object, ...], tuple[object, ...]]:
    """The per-term query, one index range per term: `(sql, params before the term id, params after it)`."""
    select = 'SELECT p.doc_id, p.term_frequency, p.length FROM postings p '
    order = ' ORDER BY p.doc_id'
    if resolved.conv_key is not None and resolved.document_count * 2 < resolved.tenant_document_count:
        # A conversation holding a small share of its tenant: drive from its members (CROSS JOIN
        # fixes SQLite's join order) and probe each term's postings by key, so the cost follows the
        # conversation's size rather than a common term's list across the whole tenant.
        members = 'SELECT p.doc_id, p.term_frequency, p.length FROM conversation_documents cd CROSS JOIN postings p '
        join = 'ON p.tenant_id = ? AND p.term_id = ? AND p.doc_id = cd.doc_id WHERE cd.conv_key = ?'
        member_order = ' ORDER BY cd.doc_id'  # the primary key's order: no sort step
        if resolved.filtered:
            sql = members + join + ' AND cd.run_key = ?' + member_order
            return sql, (resolved.tenant_id,), (resolved.conv_key, resolved.run_key)
        return members + join + member_order, (resolved.tenant_id,), (resolved.conv_key,)
    if resolved.conv_key is not None:
        # Most of the tenant is this conversation: walking the term's postings is the shorter way.
        join = 'JOIN conversation_documents cd ON cd.conv_key = ? AND cd.doc_id = p.doc_id '
        if resolved.filtered:
            sql = select + join + 'AND cd.run_key = ? WHERE p.tenant_id = ? AND p.term_id = ?' + order
            return sql, (resolved.conv_key, resolved.run_key, resolved.tenant_id), ()
        sql = select + join + 'WHERE p.tenant_id = ? AND p.term_id = ?' + order
        return sql, (resolved.conv_key, resolved.tenant_id), ()
    if resolved.filtered:
        sql = (
            select  # noqa: S608 (constant SQL fragments only; values are parameters)
            + 'WHERE p.tenant_id = ? AND p.term_id = ? AND p.doc_id IN '
            '(SELECT doc_id FROM conversation_documents WHERE run_key = ?)' + order
        )
        return sql, (resolved.tenant_id,), (resolved.run_key,)
    return select + 'WHERE p.tenant_id = ? AND p.term_id = ?' + order, (resolved.tenant_id,), ()


async def postings(db: Database, target: SearchTarget, terms: Sequence[str]) -> dict[str, list[Posting]]:
    resolved = await _resolve(db, target)
    wanted = list(dict.fromkeys(terms))
    if resolved is None or not wanted:
        return {}
    term_ids = dict(
        await db.rows(
            'SELECT term, term_id FROM terms WHERE term IN (SELECT value FROM json_each(?))', (json.dumps(wanted),)
        )
    )
    sql, before, after = _postings_query(resolved)
    found: dict[str, list[Posting]] = {}
    for term in wanted:
        term_id = term_ids.get(term)
        if term_id is None:
            continue
        rows = await db.rows(sql, (*before, term_id, *after))
        if rows:
            found[term] = list(map(Posting._make, rows))
    return found


_ROW_COLUMNS = (
    'SELECT cd.doc_id, cd.entry_key, cd.position, cd.run_key, r.run_id, e.entry_id, e.message, '
    'c.conversation_id, c.conv_key, cd.occurrences, d.content_hash '
    'FROM conversation_documents cd JOIN documents d ON d.doc_id = cd.doc_id '
    'JOIN entries e ON e.entry_key = cd.entry_key '
    'JOIN conversations c ON c.conv_key = cd.conv_key LEFT JOIN runs r ON r.run_key = cd.run_key '
)

_SCOPE_ROWS = (
    'SELECT cd.doc_id, cd.entry_key, cd.position, cd.run_key, r.run_id, e.entry_id, e.message, '
    'c.conversation_id, c.conv_key, cd.occurrences, d.content_hash '
    'FROM json_each(?) AS wanted CROSS JOIN conversation_documents cd ON cd.doc_id = wanted.value '
    'JOIN documents d ON d.doc_id = cd.doc_id JOIN conversations c ON c.conv_key = cd.conv_key '
    'JOIN entries e ON e.entry_key = cd.entry_key LEFT JOIN runs r ON r.run_key = cd.run_key '
    'WHERE d.tenant_id = ? AND c.tenant_id = ?'
)

_CHAIN = """
WITH RECURSIVE chain(k) AS (
    SELECT head_key FROM conversations WHERE conv_key = ? AND head_key IS NOT NULL
    UNION ALL
    SELECT e.parent_key FROM chain JOIN entries e ON e.entry_key = chain.k WHERE e.parent_key IS NOT NULL
)
SELECT e.content_hash, e.entry_key, e.position, e.run_key, r.run_id, e.entry_id, e.message
FROM chain CROSS JOIN entries e ON e.entry_key = chain.k LEFT JOIN runs r ON r.run_key = e.run_key
WHERE e.unindexed = 0 AND e.content_hash IN ({})
"""
"""`_occurrences.ChainQuery`: the conversation's current history, walked up from its head."""


async def documents(
    db: Database,
    target: SearchTarget,
    doc_ids: Sequence[int],
    *,
    context: int = 0,
    limit: int | None = None,
    exclude_run_id: str | None = None,
) -> list[DocumentRow]:
    resolved = await _resolve(db, target)
    if resolved is None or not doc_ids:
        return []
    run_filter = ' AND cd.run_key = ?' if resolved.filtered else ''
    run_params: tuple[object, ...] = (resolved.run_key,) if resolved.filtered else ()
    if resolved.role is not None:
        run_filter += ' AND d.role = ?'
        run_params = (*run_params, resolved.role)
    ids = json.dumps([int(doc_id) for doc_id in doc_ids])
    if resolved.conv_key is not None:
        rows = await db.rows(
            _ROW_COLUMNS  # noqa: S608 (constant SQL fragments only; values are parameters)
            + 'WHERE cd.conv_key = ? AND cd.doc_id IN (SELECT value FROM json_each(?))'
            + run_filter,
            (resolved.conv_key, ids, *run_params),
        )
    else:
        # The document must be the tenant's, and so (documents being per tenant) is every conversation
        # holding it. Driven from the wanted ids (CROSS JOIN fixes SQLite's join order), so the cost
        # follows the page, not the tenant's number of conversations.
        rows = await db.rows(
            _SCOPE_ROWS + run_filter + ' ORDER BY cd.entry_key, cd.conv_key',
            (ids, resolved.tenant_id, resolved.tenant_id, *run_params),
        )

    async def chain(conv_key: int, hashes: Sequence[bytes]) -> list[Row]:
        return await db.rows(_CHAIN.format(', '.join('?' * len(hashes))), (conv_key, *hashes))

    async def read_context(sql: str, hits: Sequence[tuple[int, int, int]]) -> list[Row]:
        return await db.rows(_HITS + sql, (json.dumps(hits),))

    page = await page_rows(
        doc_ids,
        rows,
        chain,
        run_key=resolved.run_key if resolved.filtered else None,
        exclude_run_id=exclude_run_id,
        limit=limit,
    )
    return await document_rows(page, read_context, context)


_HITS = (
    "WITH RECURSIVE hits(k, conv, pos, n) AS (SELECT e.entry_key, json_extract(w.value, '$[1]'), e.position, "
    "json_extract(w.value, '$[2]') FROM json_each(?) AS w "
    "JOIN entries e ON e.entry_key = json_extract(w.value, '$[0]')),"
)
"""The context query's points, from a JSON array of `[entry_key, conv_key, n]`; the rule itself is `_context`'s."""


# --- Scope-wide reads in impact order ---------------------------------------------------------------
# Used by `_recall` for a target spanning a whole tenant, where a common term's posting list can hold
# most of the store: only the head of each term-frequency group is read, plus exact lookups for the
# candidates that other terms found. Conversation- and run-scoped targets read whole lists instead.


def _tenant_target(resolved: _Target | None) -> _Target | None:
    if resolved is None or resolved.conv_key is not None or resolved.filtered or resolved.role is not None:
        return None
    return resolved


async def document_frequencies(db: Database, target: SearchTarget, terms: Sequence[str]) -> dict[str, int] | None:
    """How many of the target's documents hold each term; `None` for targets this path does not serve."""
    resolved = _tenant_target(await _resolve(db, target))
    if resolved is None:
        return None
    rows = await db.rows(
        # CROSS JOIN keeps SQLite's join order: from the query's few terms to their rows, never the reverse.
        'SELECT t.term, s.document_count FROM terms t '
        'CROSS JOIN term_documents s ON s.tenant_id = ? AND s.term_id = t.term_id '
        'WHERE t.term IN (SELECT value FROM json_each(?))',
        (resolved.tenant_id, json.dumps(list(dict.fromkeys(terms)))),
    )
    return {term: int(count) for term, count in rows if count}


_FREQUENCY_GROUPS = """
WITH RECURSIVE groups(tf) AS (
    SELECT max(term_frequency) FROM postings WHERE tenant_id = :tenant AND term_id = :term
    UNION ALL
    SELECT (SELECT max(term_frequency) FROM postings
            WHERE tenant_id = :tenant AND term_id = :term AND term_frequency < groups.tf)
    FROM groups WHERE groups.tf IS NOT NULL
)
SELECT tf FROM groups WHERE tf IS NOT NULL
"""


async def top_postings(
    db: Database, target: SearchTarget, term: str, per_group: int
) -> tuple[list[Posting], list[tuple[int, int]]] | None:
    """The `per_group` shortest documents of each term-frequency group, and where each unfinished group stopped.

    Returns `(postings, frontier)`: `frontier` holds `(term_frequency, length)` for every group that
    has more documents, all of them at least that long, so none can outscore that pair for this term.
    """
    resolved = _tenant_target(await _resolve(db, target))
    if resolved is None:
        return None
    term_id = await db.value('SELECT term_id FROM terms WHERE term = ?', (term,))
    if term_id is None:
        return [], []
    params = {'tenant': resolved.tenant_id, 'term': term_id}
    groups = [row[0] for row in await db.rows(_FREQUENCY_GROUPS, params)]
    postings: list[Posting] = []
    frontier: list[tuple[int, int]] = []
    for frequency in groups:
        rows = await db.rows(
            'SELECT doc_id, term_frequency, length FROM postings '
            'WHERE tenant_id = ? AND term_id = ? AND term_frequency = ? ORDER BY length, doc_id LIMIT ?',
            (resolved.tenant_id, term_id, frequency, per_group + 1),
        )
        if len(rows) > per_group:
            frontier.append((frequency, rows[per_group][2]))
            rows = rows[:per_group]
        postings.extend(map(Posting._make, rows))
    return postings, frontier


async def postings_for(db: Database, target: SearchTarget, term: str, doc_ids: Sequence[int]) -> list[Posting]:
    """The term's postings among `doc_ids` (exact lookups by key)."""
    resolved = _tenant_target(await _resolve(db, target))
    if resolved is None or not doc_ids:
        return []
    term_id = await db.value('SELECT term_id FROM terms WHERE term = ?', (term,))
    if term_id is None:
        return []
    rows = await db.rows(
        'SELECT doc_id, term_frequency, length FROM postings WHERE tenant_id = ? AND term_id = ? '
        'AND doc_id IN (SELECT value FROM json_each(?))',
        (resolved.tenant_id, term_id, json.dumps([int(doc_id) for doc_id in doc_ids])),
    )
    return list(map(Posting._make, rows))
