"""The documents of a pruned search's lists that can still reach the page, found without merging every list.

`search._pruned` bounds each document read by what its postings weigh (`lower`) plus, for each tiered term it
was not read under, that term's `rest`. Written relative to the rests, a document's upper bound is
`R + Σ e_i(d)`, where `R` is the sum of the rests and `e_i(d) = w_i(d) - rest_i` is what its posting of term
`i` weighs above the rest (a whole list's rest is 0). It can reach the page only if that sum reaches
`Δ = floor - R`. So for any thresholds `τ_i ≥ 0` adding up to at most `Δ`, a document whose every posting
lies below its term's threshold cannot: its excesses add up to less than `Δ`. Only the postings at or above
their thresholds are merged, and the documents they name are looked up in every list by binary search.

A query of several common words at a million messages holds hundreds of thousands of documents in its deeper
tiers, of which a few thousand can reach the page; merging them all was most of such a search's time
(docs/design/store.md, "Only the contenders bounded", has the figures). Where no choice spares enough,
`contenders` answers `None` and the caller merges every list, as before.

Two choices are tried in turn: thresholds (`_above_thresholds`), and the documents with a posting whose
excess, times the number of lists holding the document, reaches `Δ` (`_strong_enough`): `c` excesses that
add up to `Δ` hold one of at least `Δ / c`. Two lists try thresholds first, which keep few documents where
the best stand far above the rest. From `STRONG_FIRST` lists on, the strong postings come first: the best
excesses of three or four common words add up to far more than `Δ`, so thresholds adding up to `Δ` rule out
little, and trying them first mostly costs a failed attempt (docs/design/store.md, "The shared documents
first, from three lists", and "A posting strong enough for the lists holding its document").

The floor comes from documents whose lower bounds are exact sums of their postings: their `limit`-th best
is at most the page's threshold. The strong postings' floor comes from the documents held by the most lists.
The thresholds' first choice keeps about `_FIRST` postings per list; if its floor proves the thresholds, it
stands, otherwise the thresholds are chosen again from that floor and the two choices joined, which only
raises the floor. Every rule out is exact; `SAFETY` keeps the float sums on the safe side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from temporal_recall.search._bm25_arrays import found_in, kth_largest, slots_in_union, union_of

__all__ = ('STRONG_FIRST', 'Contenders', 'contenders', 'every_document')

_FIRST = 256
"""The postings per list the first choice keeps, about: few enough to merge for nothing, enough for a floor."""

_SAMPLE_EVERY = 16
"""Thresholds are chosen from every this-many-th excess of a list: an estimate of how many postings each
keeps, which only decides how much is merged, never what is ruled out."""

_RANKS = tuple(2**power for power in range(4, 18))
"""The numbers of postings a list's threshold may keep (besides none and every one)."""

STRONG_FIRST = 3
"""From this many lists holding postings on, the strong postings are chosen first, then thresholds: the more
lists, the further their best excesses add up beyond `Δ`, so thresholds adding up to `Δ` keep more of each."""

MOST_KEPT = 0.15
"""Past this share of all the postings, the thresholds would spare little: the caller merges every list."""


@dataclass(frozen=True)
class Contenders:
    """The documents chosen, ascending, with the weights read of each (added in list order) and, per list,
    whether it holds each one."""

    doc_ids: NDArray[np.int64]
    lower: NDArray[np.float64]
    held: list[NDArray[np.bool_]]


def contenders(
    lists: Sequence[tuple[NDArray[np.int64], NDArray[np.float64], float]], limit: int, safety: float
) -> Contenders | None:
    """The documents that can reach a page of `limit` given each list's `(doc_ids, weights, rest)` (rest 0.0
    for a whole list), or `None` when choosing would spare too little (the caller merges every list)."""
    excesses = [weights - rest for _, weights, rest in lists]
    choices = (_above_thresholds, _strong_enough)
    if sum(1 for doc_ids, _, _ in lists if len(doc_ids)) >= STRONG_FIRST:
        choices = choices[::-1]
    for choice in choices:
        if (chosen := choice(lists, excesses, limit, safety)) is not None:
            return chosen
    return None


def every_document(lists: Sequence[tuple[NDArray[np.int64], NDArray[np.float64], float]]) -> Contenders:
    """Every document of the lists, merged: one stable sort of all their ids (`slots_in_union`), each
    document's weights added in list order."""
    doc_ids, slots = slots_in_union([ids for ids, _, _ in lists])
    lower = np.zeros(len(doc_ids))
    held: list[NDArray[np.bool_]] = []
    for (_, weights, _), at in zip(lists, slots, strict=True):
        lower[at] += weights
        found = np.zeros(len(doc_ids), dtype=bool)
        found[at] = True
        held.append(found)
    return Contenders(doc_ids, lower, held)


def _above_thresholds(
    lists: Sequence[tuple[NDArray[np.int64], NDArray[np.float64], float]],
    excesses: list[NDArray[np.float64]],
    limit: int,
    safety: float,
) -> Contenders | None:
    """The documents with a posting at or above its list's threshold (`None` when they would be too many)."""
    total = sum(len(doc_ids) for doc_ids, _, _ in lists)
    rests = sum(rest for _, _, rest in lists)
    levels = [_levels(excess) for excess in excesses]
    first = [_at_rank(choices, max(_FIRST, limit)) for choices in levels]
    chosen = _choose(lists, excesses, first)
    if len(chosen.doc_ids) < limit:
        return None  # Too few for a floor (their postings mostly weigh no more than the rests).
    # The floor the chosen documents prove, less what float sums in another order may differ by.
    reach = kth_largest(chosen.lower, limit) * (1 - 2 * safety) - rests
    if reach <= 0:
        return None  # Even the best documents do not rise above the rests: the bounds cannot prove a page.
    if sum(first) <= reach:
        return chosen
    at = _allocate(levels, reach)
    if sum(choices[index][1] for choices, index in zip(levels, at, strict=True)) > MOST_KEPT * total:
        return None
    # The thresholds fit the floor of the first choice; joined with it, the floor only rises.
    thresholds = [choices[index][0] for choices, index in zip(levels, at, strict=True)]
    return _choose(lists, excesses, thresholds, also=chosen.doc_ids)


def _levels(excess: NDArray[np.float64]) -> list[tuple[float, int]]:
    """A list's thresholds to choose from, highest first, each with about how many postings it keeps: above
    the best excess (none), the excess at each of `_RANKS` (estimated from a sample), and 0 (those above the rest)."""
    best = float(excess.max(initial=0.0))
    if best <= 0:
        return [(0.0, len(excess))]
    levels = [(float(np.nextafter(best, np.inf)), 0)]
    sample = excess[::_SAMPLE_EVERY]
    ranks = [rank for rank in _RANKS if rank // _SAMPLE_EVERY < len(sample) and rank < len(excess)]
    if ranks:
        kth = sorted({len(sample) - 1 - rank // _SAMPLE_EVERY for rank in ranks})
        parted = np.partition(sample, kth)
        for rank in ranks:
            value = float(parted[len(sample) - 1 - rank // _SAMPLE_EVERY])
            if 0 < value < levels[-1][0]:
                levels.append((value, rank))
    levels.append((0.0, len(excess)))
    return levels


def _at_rank(levels: list[tuple[float, int]], rank: int) -> float:
    """The highest threshold keeping at least about `rank` postings (0 when none does)."""
    return next((value for value, kept in levels if kept >= rank), 0.0)


def _allocate(levels: list[list[tuple[float, int]]], budget: float) -> list[int]:
    """Each list's level (its index in `levels`) whose thresholds add up to at most `budget` and keep few
    postings: from the highest, the list whose next level frees the most of the sum per posting it adds steps
    down, until they fit."""
    at = [0] * len(levels)
    while sum(choices[index][0] for choices, index in zip(levels, at, strict=True)) > budget:
        best, step = -1.0, -1
        for number, (choices, index) in enumerate(zip(levels, at, strict=True)):
            if index + 1 < len(choices):
                (high, kept), (low, more) = choices[index], choices[index + 1]
                value = (high - low) / max(more - kept, 1)
                if value > best:
                    best, step = value, number
        if step < 0:
            break  # Every threshold is 0 (the last level): their sum fits any positive budget.
        at[step] += 1
    return at


def _choose(
    lists: Sequence[tuple[NDArray[np.int64], NDArray[np.float64], float]],
    excesses: list[NDArray[np.float64]],
    thresholds: Sequence[float],
    also: NDArray[np.int64] | None = None,
) -> Contenders:
    """The documents with a posting at or above its list's threshold (and `also`), each looked up in every list."""
    picked = [
        np.compress(excess >= threshold, doc_ids)
        for (doc_ids, _, _), excess, threshold in zip(lists, excesses, thresholds, strict=True)
    ]
    return _looked_up(lists, union_of([*picked, also] if also is not None else picked))


def _looked_up(
    lists: Sequence[tuple[NDArray[np.int64], NDArray[np.float64], float]], doc_ids: NDArray[np.int64]
) -> Contenders:
    """The documents `doc_ids` (ascending), each looked up in every list by binary search."""
    lower = np.zeros(len(doc_ids))
    held: list[NDArray[np.bool_]] = []
    for ids, weights, _ in lists:
        at, found = found_in(ids, doc_ids)
        if len(ids):  # Adding 0.0 where the list does not hold the document changes no sum.
            lower += np.where(found, np.take(weights, at), 0.0)
        held.append(found)
    return Contenders(doc_ids, lower, held)


WIDEST = 1 << 25
"""The widest span of ids (bytes of counts) `_strong_enough` marks; wider ones are merged instead."""

SPREAD = 64
"""`_strong_enough` marks ids spanning at most this many times as many ids as the lists hold postings: a pass
over a byte per id costs a fraction of sorting a posting, so up to here the counts cost about what merging
the lists would (docs/design/store.md, "A posting strong enough for the lists holding its document")."""


def counted_span(lists: Sequence[tuple[NDArray[np.int64], NDArray[np.float64], float]]) -> tuple[int, int] | None:
    """The lowest id and the span of ids `_strong_enough` counts a byte each for: `None` when fewer than two
    lists hold postings (no document is shared) or when the ids spread wider than `SPREAD` times the postings
    or `WIDEST`."""
    held_lists = [doc_ids for doc_ids, _, _ in lists if len(doc_ids)]
    if len(held_lists) < 2:
        return None
    postings = sum(len(doc_ids) for doc_ids in held_lists)
    low = min(int(doc_ids[0]) for doc_ids in held_lists)
    span = max(int(doc_ids[-1]) for doc_ids in held_lists) - low + 1
    return None if span > min(SPREAD * postings, WIDEST) else (low, span)


def _strong_enough(
    lists: Sequence[tuple[NDArray[np.int64], NDArray[np.float64], float]],
    excesses: list[NDArray[np.float64]],
    limit: int,
    safety: float,
) -> Contenders | None:
    """The documents with a posting whose excess, times the number of lists holding the document, reaches the
    floor the documents held by the most lists prove (`None` when fewer than `limit` documents are held by
    more than one list, when none of them proves a floor above the rests, or when the ids spread too wide).

    A document `c` lists hold has `R + Σ e` over them as its upper bound, so it can reach the page only if
    those `c` excesses add up to `Δ = floor - R`, and then one of them at least reaches `Δ / c`. Which lists
    hold each id is counted in an array indexed by id, one byte each, in one pass per list: the ids ascend,
    so the passes stay in the cache, where merging every list means sorting all the ids. The floor comes from
    the documents held by the most lists that are at least `limit` (their excesses add up over the most
    terms), looked up in every list; failing that, from those held by fewer, down to every shared one.
    Where several common words' best excesses add up to far more than `Δ`, most documents two lists hold
    still lie below `Δ / 2` in both, and are left out unread (docs/design/store.md, "A posting strong
    enough for the lists holding its document")."""
    counted = counted_span(lists)
    if counted is None:
        return None
    low, span = counted
    counts = np.zeros(span, dtype=np.uint8)
    offsets = [doc_ids - low for doc_ids, _, _ in lists]
    for at in offsets:
        counts[at] += 1  # A list holds an id once; a query has at most `MAX_QUERY_TERMS` (32) lists, below 256.
    shares = [np.take(counts, at) for at in offsets]
    rests = sum(rest for _, _, rest in lists)
    most = max(int(share.max(initial=0)) for share in shares)
    for held_by in range(most, 1, -1):
        proving = union_of(
            [np.compress(share >= held_by, doc_ids) for (doc_ids, _, _), share in zip(lists, shares, strict=True)]
        )
        if len(proving) < limit:
            continue
        # Their lower bounds are exact sums over every list, so their `limit`-th best is at most the page's.
        reach = kth_largest(_looked_up(lists, proving).lower, limit) * (1 - 2 * safety) - rests
        if reach > 0:
            break
    else:
        return None  # Too few shared documents, or none of them rises above the rests.
    strong = [
        np.compress(excess * share >= reach, doc_ids)
        for (doc_ids, _, _), excess, share in zip(lists, excesses, shares, strict=True)
    ]
    return _looked_up(lists, union_of([*strong, proving]))
