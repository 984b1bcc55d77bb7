"""The search reads (`IndexReader`): stats, posting lists and document rows for a `SearchTarget`, on any backend.

Scope confinement is this module's first rule: every statement enforces the target in SQL (tenant,
conversation membership, run, role), so a row outside the target is never read, let alone filtered
afterwards. A conversation target must exist with exactly the target's scope (`None` included);
otherwise the reader answers exactly as if it did not exist. Both backends give the same answers
(same rows, same order), which is what makes `search_history` rank the same hits with the same
scores on both.

Statements that read the same on both backends are written once: the target's resolution, the
stats, and the document rows (one statement that resolves its target itself, `_TARGET`, with the
join order as the only dialect switch). Posting lists are read the way each backend does best,
because their costs differ:

- SQLite runs the whole read on its connection thread, where a statement costs microseconds: it
  resolves the target first (`resolve`), then reads one index range per term, with the plan the
  conversation's share of its tenant calls for spelled out in the text (SQLite plans without
  statistics, so the text fixes the join order).
- PostgreSQL pays a round trip per statement (the store reads without a snapshot transaction, so
  a statement is one round trip): every term's postings come back in one statement that resolves
  the target itself and chooses its plan in SQL, from the stored counters (`LATERAL` probes fenced
  by `OFFSET 0`, posting lists as arrays).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat

from ._context import hits_query
from ._occurrences import page_rows
from ._protocol import DocumentRow, IndexStats, Posting, SearchTarget
from ._serialization import document_rows, scope_key
from ._session import Dialect, Session

__all__ = ('Target', 'documents', 'index_stats', 'postings', 'resolve')


@dataclass(frozen=True, kw_only=True)
class Target:
    """A `SearchTarget`'s keys and counters, as `resolve` found them."""

    tenant_id: int
    conv_key: int | None
    run_key: int | None
    """Only meaningful when `filtered`."""
    filtered: bool
    """A run-filtered target: only documents said in run `run_key`."""
    role: str | None
    document_count: int
    """The conversation's documents (the tenant's for a scope-wide target)."""
    total_length: int
    tenant_document_count: int


async def resolve(session: Session, target: SearchTarget) -> Target | None:
    """The target's keys, in one statement; `None` when nothing can match (unknown tenant, conversation or run)."""
    row = await session.one(
        'SELECT t.tenant_id, t.document_count, t.total_length, c.conv_key, c.document_count, c.total_length, '
        '(SELECT r.run_key FROM runs r WHERE r.run_id = $3) '
        'FROM tenants t LEFT JOIN conversations c ON c.conversation_id = $2 AND c.tenant_id = t.tenant_id '
        'WHERE t.scope_key = $1',
        *_target_params(target),
    )
    if row is None:
        return None
    filtered = target.run_id is not None
    if filtered and row[6] is None:
        return None
    own = target.conversation_id is not None
    if own and row[3] is None:
        return None
    return Target(
        tenant_id=row[0],
        conv_key=row[3],
        run_key=row[6],
        filtered=filtered,
        role=target.role,
        document_count=row[4] if own else row[1],
        total_length=row[5] if own else row[2],
        tenant_document_count=row[1],
    )


def _target_params(target: SearchTarget) -> tuple[object, ...]:
    """`$1` scope key, `$2` conversation id, `$3` run id: what `resolve` and `_TARGET` read."""
    return (scope_key(target.scope), target.conversation_id, target.run_id)


async def index_stats(session: Session, target: SearchTarget) -> IndexStats | None:
    resolved = await resolve(session, target)
    if resolved is None:
        # Fail closed: a conversation outside the scope is reported exactly like a missing one.
        exists = target.conversation_id is None or await session.one(
            'SELECT 1 FROM conversations c JOIN tenants t ON t.tenant_id = c.tenant_id '
            'WHERE c.conversation_id = $1 AND t.scope_key = $2',
            target.conversation_id,
            scope_key(target.scope),
        )
        return IndexStats(document_count=0, total_length=0) if exists else None
    if not resolved.filtered:
        return IndexStats(document_count=resolved.document_count, total_length=resolved.total_length)
    if resolved.conv_key is not None:
        row = await session.one(
            'SELECT count(*), coalesce(sum(d.length), 0) FROM conversation_documents cd '
            'JOIN documents d ON d.doc_id = cd.doc_id WHERE cd.run_key = $1 AND cd.conv_key = $2',
            resolved.run_key,
            resolved.conv_key,
        )
    else:
        row = await session.one(
            'SELECT count(*), coalesce(sum(d.length), 0) '
            'FROM (SELECT DISTINCT doc_id FROM conversation_documents WHERE run_key = $1) AS run '
            'JOIN documents d ON d.doc_id = run.doc_id WHERE d.tenant_id = $2',
            resolved.run_key,
            resolved.tenant_id,
        )
    assert row is not None
    return IndexStats(document_count=int(row[0]), total_length=int(row[1]))


async def postings(session: Session, target: SearchTarget, terms: Sequence[str]) -> dict[str, list[Posting]]:
    """Each term's postings among the target's documents, in `doc_id` order (terms with none are left out)."""
    wanted = list(dict.fromkeys(terms))
    if not wanted:
        return {}
    if session.dialect.plans_joins:
        return await _postings_in_one_statement(session, target, wanted)
    return await _postings_per_term(session, target, wanted)


# --- SQLite: the target resolved first, then one index range per term --------------------------------


def _postings_per_term_sql(resolved: Target) -> tuple[str, tuple[object, ...]]:
    """The per-term query and its parameters after the term id (`$1`).

    The parameters are `$2` tenant, `$3` conversation, `$4` run, `$5` role, as far as the statement
    names them (SQLite binds exactly as many parameters as the highest number it names).
    """
    select = 'SELECT p.doc_id, p.term_frequency, p.length FROM postings p '
    order = ' ORDER BY p.doc_id'
    run = resolved.filtered
    if resolved.conv_key is not None and resolved.document_count * 2 < resolved.tenant_document_count:
        # A conversation holding a small share of its tenant: drive from its members (CROSS JOIN
        # fixes SQLite's join order) and probe each term's postings by key, so the cost follows the
        # conversation's size rather than a common term's list across the whole tenant. The members
        # come in the primary key's order: no sort step.
        sql = (
            'SELECT p.doc_id, p.term_frequency, p.length FROM conversation_documents cd CROSS JOIN postings p '  # noqa: S608
            'ON p.tenant_id = $2 AND p.term_id = $1 AND p.doc_id = cd.doc_id WHERE cd.conv_key = $3'
            + (' AND cd.run_key = $4' if run else '')
            + ' ORDER BY cd.doc_id'
        )
    elif resolved.conv_key is not None:
        # Most of the tenant is this conversation: walking the term's postings is the shorter way.
        sql = (
            select
            + 'JOIN conversation_documents cd ON cd.conv_key = $3 AND cd.doc_id = p.doc_id '
            + ('AND cd.run_key = $4 ' if run else '')
            + 'WHERE p.tenant_id = $2 AND p.term_id = $1'
            + order
        )
    elif run:
        sql = (
            select  # noqa: S608 (constant SQL fragments only)
            + 'WHERE p.tenant_id = $2 AND p.term_id = $1 AND p.doc_id IN '
            + '(SELECT doc_id FROM conversation_documents WHERE run_key = $4)'
            + order
        )
    else:
        sql = select + 'WHERE p.tenant_id = $2 AND p.term_id = $1' + order
    params = (resolved.tenant_id, resolved.conv_key, resolved.run_key, resolved.role)
    if resolved.role is not None:
        sql = (
            'SELECT p.doc_id, p.term_frequency, p.length FROM ('  # noqa: S608 (constant SQL fragments only)
            + sql
            + ') AS p JOIN documents d ON d.doc_id = p.doc_id WHERE d.role = $5 ORDER BY p.doc_id'
        )
        return sql, params
    return sql, params[: 3 if run else 2 if resolved.conv_key is not None else 1]


async def _postings_per_term(session: Session, target: SearchTarget, wanted: list[str]) -> dict[str, list[Posting]]:
    resolved = await resolve(session, target)
    if resolved is None:
        return {}
    dialect = session.dialect
    term_ids: dict[str, int] = {
        row[0]: row[1]
        for row in await session.rows(
            f'SELECT term, term_id FROM terms WHERE term {dialect.in_array(1, "text")}',  # noqa: S608 (constant SQL)
            dialect.array(wanted),
        )
    }
    sql, params = _postings_per_term_sql(resolved)
    found: dict[str, list[Posting]] = {}
    for term in wanted:
        term_id = term_ids.get(term)
        if term_id is None:
            continue
        rows = await session.rows(sql, term_id, *params)
        if rows:
            found[term] = list(map(Posting._make, rows))
    return found


# --- PostgreSQL: every term in one statement that resolves its target --------------------------------

_TARGET = (
    'WITH tenant AS (SELECT tenant_id, document_count FROM tenants WHERE scope_key = $1), '
    'conv AS (SELECT conv_key, document_count * 4 <= (SELECT document_count FROM tenant) AS small '
    'FROM conversations WHERE conversation_id = $2 AND tenant_id = (SELECT tenant_id FROM tenant)), '
    'run AS (SELECT run_key FROM runs WHERE run_id = $3) '
)
"""Resolves a target inside the statement that uses it (`_target_params`): one round trip instead of
two. A part that does not exist resolves to NULL, which matches no row, so an unknown tenant,
conversation or run answers nothing, exactly as a failed `resolve` does. Read alike by both backends."""

_MEMBERS = 'FROM conversation_documents cd WHERE cd.conv_key = (SELECT conv_key FROM conv) '
_OF_RUN = 'AND cd.run_key = (SELECT run_key FROM run) '
_HIT = 'SELECT p.doc_id, p.term_frequency, p.length '
_TERM = 'p.tenant_id = (SELECT tenant_id FROM tenant) AND p.term_id = t.term_id '
_PROBE = 'CROSS JOIN LATERAL (' + _HIT + 'FROM postings p WHERE ' + _TERM + 'AND p.doc_id = cd.doc_id OFFSET 0) AS p '
_SCAN = 'JOIN postings p ON ' + _TERM + 'AND p.doc_id = cd.doc_id '
_RUN_DOCS = 'AND p.doc_id IN (SELECT doc_id FROM conversation_documents WHERE run_key = (SELECT run_key FROM run)) '


@functools.lru_cache(maxsize=16)
def _postings_sql(in_conversation: bool, of_run: bool, with_role: bool) -> str:
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
    branch is never executed (the `OFFSET 0` fence keeps the probe a per-member index lookup).
    """
    if not in_conversation:
        hits = _HIT + 'FROM postings p WHERE ' + _TERM + (_RUN_DOCS if of_run else '')
    else:
        members = _MEMBERS + (_OF_RUN if of_run else '')
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
    if with_role:
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


async def _postings_in_one_statement(
    session: Session, target: SearchTarget, wanted: list[str]
) -> dict[str, list[Posting]]:
    sql = _postings_sql(target.conversation_id is not None, target.run_id is not None, target.role is not None)
    role = () if target.role is None else (target.role,)
    found: dict[str, list[Posting]] = {}
    for n, doc_ids, frequencies, lengths in await session.rows(sql, *_target_params(target), wanted, *role):
        columns = _in_doc_order(doc_ids, frequencies, lengths)
        found[wanted[n - 1]] = list(map(_new_posting, repeat(Posting), zip(*columns, strict=True)))
    return {term: found[term] for term in wanted if term in found}


# --- Document rows: one statement on both backends ---------------------------------------------------

_ROW_COLUMNS = (
    'SELECT cd.doc_id, cd.entry_key, cd.position, cd.run_key, r.run_id, e.entry_id, e.message, '
    'c.conversation_id, c.conv_key, cd.occurrences, d.content_hash '
)
_ROW_JOINS = (
    'JOIN documents d ON d.doc_id = cd.doc_id JOIN entries e ON e.entry_key = cd.entry_key '
    'JOIN conversations c ON c.conv_key = cd.conv_key LEFT JOIN runs r ON r.run_key = cd.run_key '
)


@functools.lru_cache(maxsize=32)
def _documents_sql(dialect: Dialect, in_conversation: bool, of_run: bool, with_role: bool) -> str:
    """The membership rows of the wanted documents ($4) in the target, first appearance first."""
    if in_conversation:
        sql = (
            _ROW_COLUMNS  # noqa: S608 (constant SQL fragments only; values are parameters)
            + 'FROM conversation_documents cd '
            + _ROW_JOINS
            + f'WHERE cd.conv_key = (SELECT conv_key FROM conv) AND cd.doc_id {dialect.in_array(4, "bigint")}'  # noqa: S608
        )
    else:
        # The document must be the tenant's, and so (documents being per tenant) is every conversation
        # holding it. A planner that takes the ids as an index condition (`= ANY`) chooses the order
        # itself; otherwise the read is driven from the wanted ids (SQLite's `CROSS JOIN` fixes its
        # join order), so the cost follows the page, not the tenant's number of conversations.
        if dialect.plans_joins:
            source, wanted = 'FROM conversation_documents cd ', f' AND cd.doc_id {dialect.in_array(4, "bigint")}'
        else:
            ids = dialect.each(4, 'bigint')
            source, wanted = f'FROM {ids} {dialect.join_in_order} conversation_documents cd ON cd.doc_id = value ', ''
        sql = (
            _ROW_COLUMNS  # noqa: S608 (constant SQL fragments only; values are parameters)
            + source
            + _ROW_JOINS
            + 'WHERE d.tenant_id = (SELECT tenant_id FROM tenant) AND c.tenant_id = (SELECT tenant_id FROM tenant)'
            + wanted
        )
    if of_run:
        sql += ' AND cd.run_key = (SELECT run_key FROM run)'
    if with_role:
        sql += ' AND d.role = $5'
    return _TARGET + sql + ' ORDER BY cd.entry_key, cd.conv_key'


async def documents(
    session: Session,
    target: SearchTarget,
    doc_ids: Sequence[int],
    *,
    context: int = 0,
    limit: int | None = None,
    exclude_run_id: str | None = None,
) -> list[DocumentRow]:
    if not doc_ids:
        return []
    dialect = session.dialect
    ids = [int(doc_id) for doc_id in doc_ids]
    of_run = target.run_id is not None
    sql = _documents_sql(dialect, target.conversation_id is not None, of_run, target.role is not None)
    role = () if target.role is None else (target.role,)
    rows = await session.rows(sql, *_target_params(target), dialect.array(ids), *role)
    # Every row of a run-filtered read is of the run: its key is on them, no statement needed.
    run_key = rows[0][3] if of_run and rows else None
    page = await page_rows(session, ids, rows, run_key=run_key, exclude_run_id=exclude_run_id, limit=limit)
    return await document_rows(page, hits_query(session), context)
