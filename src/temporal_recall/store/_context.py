"""The context around search hits, kept on the hit's own conversation: the one rule both backends use.

Entries are shared: a fork (into the same scope or another one) points at the entries it was forked
from and appends children to them, and a rewritten history leaves the old branch in place. So an
entry's children may belong to other conversations, other branches and other tenants, and walking
`parent_key` links downwards from a hit reaches them. A neighbour is therefore only taken from the
searched conversation's own history:

- Before the hit: its ancestors. The hit is on one of the conversation's chains, and so is every
  ancestor of it.
- After the hit: the entries of one chain ending at one of the conversation's own tips (its head
  first, then its kept branches in order) that passes through the hit. They are found by walking
  up from each tip, never down from the hit, so a child that only another conversation reaches is
  never read.

Both directions stop at the first entry of another run, as they always have. Everything is read in
one query per search (`CONTEXT_SQL`): the walk up from a conversation's tips is shared by all its
hits and stops at its earliest hit. Each backend supplies only the `hits` rows in its own dialect.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ('CONTEXT_SQL', 'ContextHit', 'neighbours_of')


@dataclass(frozen=True, kw_only=True)
class ContextHit:
    """A hit whose context is wanted: its entry, and the conversation it was found in."""

    entry_key: int
    conv_key: int
    position: int
    run_key: int | None


CONTEXT_SQL = """
convs(conv, lo) AS (SELECT conv, min(pos) FROM hits GROUP BY conv),
tips(conv, rnk, k) AS (
    SELECT c.conv_key, -1, c.head_key FROM convs JOIN conversations c ON c.conv_key = convs.conv
    WHERE c.head_key IS NOT NULL
    UNION ALL
    SELECT b.conv_key, b.ordinal, b.entry_key FROM convs JOIN conversation_branches b ON b.conv_key = convs.conv
),
walk(conv, rnk, k, parent, pos) AS (
    SELECT t.conv, t.rnk, e.entry_key, e.parent_key, e.position
    FROM tips t JOIN convs ON convs.conv = t.conv JOIN entries e ON e.entry_key = t.k
    WHERE e.position > convs.lo
    UNION ALL
    SELECT w.conv, w.rnk, e.entry_key, e.parent_key, e.position
    FROM walk w JOIN convs ON convs.conv = w.conv JOIN entries e ON e.entry_key = w.parent
    WHERE e.position > convs.lo
),
up(hit, k, parent, step, n) AS (
    SELECT h.k, h.k, e.parent_key, 0, h.n FROM hits h JOIN entries e ON e.entry_key = h.k
    UNION ALL
    SELECT up.hit, e.entry_key, e.parent_key, up.step + 1, up.n
    FROM up JOIN entries e ON e.entry_key = up.parent WHERE up.step < up.n
)
SELECT 0, up.hit, up.step, e.entry_key, e.parent_key, e.position, e.run_key, e.message
FROM up JOIN entries e ON e.entry_key = up.k WHERE up.step > 0
UNION ALL
SELECT 1, h.k, w.rnk, e.entry_key, e.parent_key, e.position, e.run_key, e.message
FROM hits h JOIN walk w ON w.conv = h.conv AND w.pos > h.pos AND w.pos <= h.pos + h.n
JOIN entries e ON e.entry_key = w.k
"""
"""The context query after the backend's `WITH RECURSIVE hits(k, conv, pos, n) AS (...),`.

`hits` holds each hit's entry key, conversation key, position and the context size. Rows are
`(direction, hit entry key, step or tip rank, entry_key, parent_key, position, run_key, message)`:
direction 0 for an ancestor `step` links up, 1 for an entry of the chain ending at tip `rank`
(-1 the head, else the branch ordinal) within `context` positions after the hit."""


def neighbours_of(
    hits: Sequence[ContextHit], rows: Iterable[Sequence[Any]], context: int
) -> dict[int, list[tuple[int, str]]]:
    """Each hit's neighbours as `(position, message JSON)`, oldest first, by hit entry key (see the module notes)."""
    before: dict[int, dict[int, Sequence[Any]]] = {}
    chains: dict[int, dict[int, dict[int, Sequence[Any]]]] = {}
    for row in rows:
        hit, place = int(row[1]), int(row[2])
        if row[0] == 0:
            before.setdefault(hit, {})[place] = row
        else:
            chains.setdefault(hit, {}).setdefault(place, {})[int(row[5])] = row
    found: dict[int, list[tuple[int, str]]] = {}
    for hit in hits:
        earlier: list[tuple[int, str]] = []
        ancestors = before.get(hit.entry_key, {})
        for step in range(1, context + 1):
            row = ancestors.get(step)
            if row is None or row[6] != hit.run_key:
                break
            earlier.append((int(row[5]), row[7]))
        earlier.reverse()
        later: list[tuple[int, str]] = []
        by_tip = chains.get(hit.entry_key, {})
        for rank in sorted(by_tip):
            chain = by_tip[rank]
            first = chain.get(hit.position + 1)
            if first is None or first[4] != hit.entry_key:
                continue  # this tip's chain does not pass through the hit
            for position in range(hit.position + 1, hit.position + context + 1):
                row = chain.get(position)
                if row is None or row[6] != hit.run_key:
                    break
                later.append((position, row[7]))
            break
        found[hit.entry_key] = [*earlier, *later]
    return found
