"""The context around search hits, kept on the hit's own conversation: the one rule both backends use.
More in docs/design/store.md.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from temporal_recall.content import load_message

from ..protocol import DocumentRow
from ..sql._session import Session

__all__ = ('CHAIN_SQL', 'STEP_SQL', 'ContextHit', 'HitsQuery', 'document_rows', 'hits_query', 'read_neighbours')


@dataclass(frozen=True, kw_only=True)
class ContextHit:
    """A point whose context is wanted: its entry, the conversation it is read in, its position and run."""

    entry_key: int
    conv_key: int
    position: int
    run_key: int | None


HitsQuery = Callable[[str, Sequence[tuple[int, int, int]]], Awaitable[Iterable[Sequence[Any]]]]
"""`(sql, [(entry_key, conv_key, n), ...]) -> rows`: runs `sql` after the backend's
`WITH RECURSIVE hits(k, conv, pos, n) AS (...),` built from those triples (`pos` is the entry's position)."""

_POINTS = (('k', 'bigint'), ('conv', 'bigint'), ('n', 'integer'))
"""The points a query starts from: `(entry_key, conv_key, n)`, bound as one table (`Dialect.rows_table`)."""


def hits_query(session: Session) -> HitsQuery:
    """The `HitsQuery` that runs `STEP_SQL` and `CHAIN_SQL` on `session`."""
    dialect = session.dialect
    start = (
        'WITH RECURSIVE hits(k, conv, pos, n) AS (SELECT e.entry_key, w.conv, e.position, w.n '  # noqa: S608
        f'FROM {dialect.rows_table(_POINTS, "w")} JOIN entries e ON e.entry_key = w.k),'
    )

    async def query(sql: str, points: Sequence[tuple[int, int, int]]) -> Iterable[Sequence[Any]]:
        return await session.rows(start + sql, *dialect.rows_params(points, len(_POINTS)))

    return query


_TIPS = """
tips(conv, rnk, k) AS (
    SELECT c.conv_key, -1, c.head_key FROM conversations c
    WHERE c.conv_key IN (SELECT conv FROM hits) AND c.head_key IS NOT NULL
    UNION ALL
    SELECT b.conv_key, b.ordinal, b.entry_key FROM conversation_branches b WHERE b.conv_key IN (SELECT conv FROM hits)
),
"""

STEP_SQL = (
    _TIPS  # noqa: S608 (constant SQL fragments only; values are parameters)
    + """
up(hit, k, parent, pos, run, msg, step, n) AS (
    SELECT h.k, p.entry_key, p.parent_key, p.position, p.run_key, p.message, 1, h.n
    FROM hits h JOIN entries e ON e.entry_key = h.k JOIN entries p ON p.entry_key = e.parent_key WHERE h.n > 0
    UNION ALL
    SELECT up.hit, p.entry_key, p.parent_key, p.position, p.run_key, p.message, up.step + 1, up.n
    FROM up JOIN entries p ON p.entry_key = up.parent WHERE up.step < up.n
),
down(hit, conv, k, pos, run, msg, step, n) AS (
    SELECT h.k, h.conv, h.k, h.pos, e.run_key, e.message, 0, h.n FROM hits h JOIN entries e ON e.entry_key = h.k
    UNION ALL
    SELECT d.hit, d.conv, c.entry_key, c.position, c.run_key, c.message, d.step + 1, d.n
    FROM down d JOIN entries c ON c.parent_key = d.k
    WHERE d.step < d.n
    AND NOT EXISTS (SELECT 1 FROM tips t WHERE t.conv = d.conv AND t.k = d.k)
    AND (SELECT count(*) FROM entries o WHERE o.parent_key = d.k) = 1
)
SELECT 0, up.hit, up.step, up.k, up.pos, up.run, up.msg, 0 FROM up
UNION ALL
SELECT 1, d.hit, d.step, d.k, d.pos, d.run, d.msg, (SELECT count(*) FROM entries x WHERE x.parent_key = d.k)
FROM down d
UNION ALL
SELECT 2, t.conv, t.rnk, t.k, (SELECT e.position FROM entries e WHERE e.entry_key = t.k), NULL, NULL, 0 FROM tips t
"""
)
"""Rows `(kind, key, step or rank, entry_key, position, run_key, message, children)`:
kind 0 an ancestor of hit `key` `step` links up; kind 1 the entry `step` links down the unambiguous
path from hit `key` (step 0 is the hit itself), with its number of children; kind 2 a tip of
conversation `key` (rank -1 the head, else the branch ordinal) and its position."""

CHAIN_SQL = (
    _TIPS  # noqa: S608 (constant SQL fragments only; values are parameters)
    + """
convs(conv, lo) AS (SELECT conv, min(pos) FROM hits GROUP BY conv),
walk(conv, rnk, k, parent, pos, run) AS (
    SELECT t.conv, t.rnk, e.entry_key, e.parent_key, e.position, e.run_key
    FROM tips t JOIN convs ON convs.conv = t.conv JOIN entries e ON e.entry_key = t.k
    WHERE e.position > convs.lo
    UNION ALL
    SELECT w.conv, w.rnk, e.entry_key, e.parent_key, e.position, e.run_key
    FROM walk w JOIN convs ON convs.conv = w.conv JOIN entries e ON e.entry_key = w.parent
    WHERE e.position > convs.lo
)
SELECT h.k, h.conv, w.rnk, w.k, w.parent, w.pos, w.run, (SELECT e.message FROM entries e WHERE e.entry_key = w.k)
FROM hits h JOIN walk w ON w.conv = h.conv AND w.pos > h.pos AND w.pos <= h.pos + h.n
"""
)
"""Rows `(point key, conversation key, tip rank, entry_key, parent_key, position, run_key, message)`:
the entries within `n` positions after each point on the chain ending at each of its conversation's tips. The walk up
from a conversation's tips is shared by all its points and stops at the earliest of them."""


_Step = tuple[int, Any, str]
"""`(position, run_key, message JSON)` of a neighbour candidate."""


async def read_neighbours(
    hits: Sequence[ContextHit], context: int, query: HitsQuery
) -> dict[int, list[tuple[int, str]]]:
    """Each hit's neighbours as `(position, message JSON)`, oldest first, by hit entry key (see the module notes)."""
    before: dict[int, dict[int, _Step]] = {}
    path: dict[int, dict[int, Sequence[Any]]] = {}
    tip_positions: dict[int, list[int]] = {}
    for row in await query(STEP_SQL, [(hit.entry_key, hit.conv_key, context) for hit in hits]):
        kind, key, step = int(row[0]), int(row[1]), int(row[2])
        if kind == 0:
            before.setdefault(key, {})[step] = (int(row[4]), row[5], row[6])
        elif kind == 1:
            path.setdefault(key, {})[step] = row
        else:
            tip_positions.setdefault(key, []).append(int(row[4]))
    later: dict[int, list[_Step]] = {}
    stuck: list[tuple[ContextHit, int, int, int]] = []
    """Paths that reached a fork or branch point: `(hit, point entry key, its position, steps left)`."""
    for hit in hits:
        steps = path.get(hit.entry_key, {})
        later[hit.entry_key] = [(int(row[4]), row[5], row[6]) for _, row in sorted(steps.items()) if _ > 0]
        if not steps:
            continue
        last = steps[max(steps)]
        point, position, left = int(last[3]), int(last[4]), context - int(last[2])
        if left > 0 and last[7] and any(tip > position for tip in tip_positions.get(hit.conv_key, ())):
            stuck.append((hit, point, position, left))
    if stuck:
        await _resolve(stuck, query, later)
    found: dict[int, list[tuple[int, str]]] = {}
    for hit in hits:
        earlier: list[tuple[int, str]] = []
        ancestors = before.get(hit.entry_key, {})
        for step in range(1, context + 1):
            item = ancestors.get(step)
            if item is None or item[1] != hit.run_key:
                break
            earlier.append((item[0], item[2]))
        earlier.reverse()
        after: list[tuple[int, str]] = []
        for position, run_key, message in later[hit.entry_key]:
            if run_key != hit.run_key:
                break
            after.append((position, message))
        found[hit.entry_key] = [*earlier, *after]
    return found


async def _resolve(
    stuck: Sequence[tuple[ContextHit, int, int, int]], query: HitsQuery, later: dict[int, list[_Step]]
) -> None:
    """Continue each stuck path along the first of its conversation's tips whose chain passes through its point."""
    depth: dict[tuple[int, int], int] = {}
    for hit, point, _, left in stuck:
        depth[point, hit.conv_key] = max(depth.get((point, hit.conv_key), 0), left)
    chains: dict[tuple[int, int], dict[int, dict[int, Sequence[Any]]]] = {}
    for row in await query(CHAIN_SQL, [(point, conv, left) for (point, conv), left in depth.items()]):
        chains.setdefault((int(row[0]), int(row[1])), {}).setdefault(int(row[2]), {})[int(row[5])] = row
    for hit, point, position, left in stuck:
        by_tip = chains.get((point, hit.conv_key), {})
        for rank in sorted(by_tip):
            chain = by_tip[rank]
            first = chain.get(position + 1)
            if first is None or first[4] != point:
                continue  # this tip's chain does not pass through the point
            for offset in range(1, left + 1):
                row = chain.get(position + offset)
                if row is None:
                    break
                later[hit.entry_key].append((int(row[5]), row[6], row[7]))
            break


async def document_rows(
    rows: Sequence[Sequence[Any]],
    read_context: HitsQuery | None,
    context: int = 0,
    *,
    roles: Mapping[int, str] | None = None,
) -> list[DocumentRow]:
    """One `DocumentRow` per row, in order: the page `index._occurrences.page_rows` chose.

    `rows` are `(doc_id, entry_key, position, run_key, run_id, entry_id, message JSON, conversation_id,
    conv_key)`; `roles` is each document's speaker, by id. `read_context` is the backend's query for
    `index._context.read_neighbours`, which reads up to `context` neighbours on each side, on the hit's own
    conversation only; `None` when no context was asked for.
    """
    chosen = list(rows)
    around: dict[int, list[tuple[int, str]]] = {}
    if read_context is not None and context > 0 and chosen:
        hits = [
            ContextHit(entry_key=int(row[1]), conv_key=int(row[8]), position=int(row[2]), run_key=row[3])
            for row in chosen
        ]
        around = await read_neighbours(hits, context, read_context)
    found: list[DocumentRow] = []
    for row in chosen:
        doc_id, entry_key, position, _, run_id, entry_id, message_json, conversation_id, _ = row
        message = load_message(message_json)
        stamp = getattr(message, 'timestamp', None)
        found.append(
            DocumentRow(
                doc_id=int(doc_id),
                conversation_id=conversation_id,
                entry_id=entry_id,
                run_id=run_id,
                position=position,
                message=message,
                role=None if roles is None else roles.get(int(doc_id)),
                timestamp=stamp if isinstance(stamp, datetime) else None,
                neighbours=[(item, load_message(text)) for item, text in around.get(int(entry_key), ())],
            )
        )
    return found
