"""BM25 over posting lists read as arrays: `rank`'s exact top-k, computed with numpy.

Every search scores its postings here (`rank_columns`). The arithmetic is `rank`'s, operation by
operation in IEEE doubles and in the same order, so every score is bitwise the one `rank` computes
from the same postings and ties break the same way (smaller `doc_id` first). Scoring every posting
as arrays costs less than deciding which ones to skip (docs/benchmarks/history.md has the measurement).

Where a mask selects from a long array, the search's kernels (here, `search._contenders`, `search._pruned`)
call `np.compress(mask, array)`, not `array[mask]`: the same elements, but on numpy 2 boolean indexing
with an irregular mask (a list's postings shared with another list, say) runs several times slower
(docs/design/store.md, "Masks by `np.compress`").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np
from numpy.typing import NDArray

from temporal_recall.search._bm25 import BM25Parameters, ScoredDocument, term_idf
from temporal_recall.store.protocol import IndexStats, PostingColumns

__all__ = (
    'DENSE_MOST',
    'DENSE_SPREAD',
    'array_weights',
    'at_least_kth',
    'best_scores',
    'found_in',
    'kth_largest',
    'rank_columns',
    'slots_in_union',
    'union_of',
)

Weighted = Sequence[tuple[NDArray[np.int64], NDArray[np.float64]]]
"""Each term's `(doc_ids, weights)`, ids ascending, in query order."""


def rank_columns(
    stats: IndexStats,
    columns: dict[str, PostingColumns],
    frequencies: dict[str, int],
    terms: Sequence[str],
    parameters: BM25Parameters,
    limit: int,
) -> list[ScoredDocument]:
    """The exact BM25 top-k of posting lists read as arrays (`IndexReader.target_postings`): `rank`'s
    answer. `frequencies` holds each term of `columns`' document frequency over the target."""
    if stats.document_count <= 0:
        return []  # As `rank`: an empty target (or one emptied since its stats were read) ranks nothing.
    average_length = stats.total_length / stats.document_count
    k1, b = parameters.k1, parameters.b
    weighted: list[tuple[NDArray[np.int64], NDArray[np.float64]]] = []
    for term in dict.fromkeys(terms):  # Each distinct term once, in query order, as `rank` adds them.
        found = columns.get(term)
        if found is None or not len(found.doc_ids):
            continue
        doc_ids, tf, dl = found
        if not tf.all():  # A stored frequency is at least 1; `term_weights` skips 0 all the same.
            keep = tf > 0
            doc_ids, tf, dl = doc_ids[keep], tf[keep], dl[keep]
        idf = term_idf(stats.document_count, frequencies[term])
        weighted.append((doc_ids, array_weights(tf, dl, idf, k1, b, average_length)))
    if not weighted:
        return []
    doc_ids, scores = best_scores(weighted, limit)
    best = np.lexsort((doc_ids, -scores))[:limit]
    return [
        ScoredDocument(int(doc_id), float(score)) for doc_id, score in zip(doc_ids[best], scores[best], strict=True)
    ]


def array_weights(
    frequencies: NDArray[np.uint32], lengths: NDArray[np.uint32], idf: float, k1: float, b: float, average_length: float
) -> NDArray[np.float64]:
    """`term_weights`' formula over arrays: `idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))`.

    The same operations on the same operands in the same grouping, so each weight is bitwise the one
    `term_weights` computes (IEEE addition and multiplication are commutative, which is all the operand
    order written here changes). Computed in place in two arrays: a common term's list can hold most of
    a tenant's documents, and each temporary array of that size costs page faults as well as a pass.
    """
    tf = frequencies.astype(np.float64)
    denominator = lengths.astype(np.float64)
    if average_length > 0:
        np.multiply(denominator, b, out=denominator)  # b * dl
        np.divide(denominator, average_length, out=denominator)  # ... / avgdl
        np.add(denominator, 1 - b, out=denominator)  # (1 - b) + ...
    else:
        denominator.fill((1 - b) + 0.0)
    np.multiply(denominator, k1, out=denominator)  # k1 * norm
    np.add(denominator, tf, out=denominator)  # tf + ...
    np.multiply(tf, idf, out=tf)  # idf * tf
    np.multiply(tf, k1 + 1, out=tf)  # ... * (k1 + 1)
    return np.divide(tf, denominator, out=tf)


DENSE_SPREAD = 16
"""Ids are summed in an array indexed by id while they span at most this many times as many ids as there
are postings: one `bincount` per term costs less than merging the lists, even across 16 times the ids."""
DENSE_MOST = 1 << 23
"""The widest span summed by id (64 MB of float64 per array); wider ones are merged instead."""


def best_scores(weighted: Weighted, limit: int) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Each document's score, its weights added term by term in query order, and of those the
    documents that can be on a page of `limit`: `(doc_ids, scores)`, every document scoring at least
    the `limit`-th best score (ties included), in no particular order.

    Each weight is added once, in term order, starting from 0.0 (which `summed`'s first copy equals),
    exact because a term holds a document once. Where the ids are dense (one tenant's documents, the
    usual case) each term's weights go into an array indexed by id with `bincount` (one pass; a
    document the term lacks gets 0.0, which adds nothing), and the arrays are added in term order;
    otherwise the sums go into the sorted union of the ids.
    """
    low = min(int(docs[0]) for docs, _ in weighted)
    span = max(int(docs[-1]) for docs, _ in weighted) - low + 1
    if span > min(DENSE_SPREAD * sum(len(docs) for docs, _ in weighted), DENSE_MOST):
        doc_ids = union_of([docs for docs, _ in weighted])
        scores = np.zeros(len(doc_ids))
        for docs, weights in weighted:
            at = np.searchsorted(doc_ids, docs)
            scores[at] = scores[at] + weights
        return at_least_kth(doc_ids, scores, limit)
    # With weights, `bincount` sums float64 (numpy's stubs type every result as integers).
    dense = cast('NDArray[np.float64]', np.bincount(weighted[0][0] - low, weighted[0][1], minlength=span))
    for docs, weights in weighted[1:]:
        np.add(dense, np.bincount(docs - low, weights, minlength=span), out=dense)
    # Every weight is positive, so a held document's sum is too. Only documents reaching a floor at most
    # the page's last score are candidates.
    floor = _sampled_floor(dense, limit)
    held = np.flatnonzero(dense >= floor) if floor > 0 else np.flatnonzero(dense)
    return at_least_kth(held + low, dense[held], limit)


_SAMPLE_EVERY = 16
"""`_sampled_floor` looks at every this-many-th value."""


def _sampled_floor(values: NDArray[np.float64], k: int) -> float:
    """The `k`-th largest of every `_SAMPLE_EVERY`-th value (0.0 when the sample holds fewer): at most the
    `k`-th largest of all, since a subset's `k`-th largest never exceeds the whole's. Comparing with it
    keeps every value of the top `k` and, on real scores, few others: the selection that follows costs a
    pass over those few instead of over every value."""
    sample = values[::_SAMPLE_EVERY]
    return float(np.partition(sample, len(sample) - k)[len(sample) - k]) if len(sample) > k else 0.0


def kth_largest(values: NDArray[np.float64], k: int) -> float:
    """The `k`-th largest of `values` (at least `k` of them): a selection among those reaching a sampled
    floor (`_sampled_floor`), which the top `k` all do, so the answer is the selection's over every value."""
    floor = _sampled_floor(values, k)
    if floor > 0:
        values = np.compress(values >= floor, values)
    return float(np.partition(values, len(values) - k)[len(values) - k])


def slots_in_union(lists: Sequence[NDArray[np.int64]]) -> tuple[NDArray[np.int64], list[NDArray[np.intp]]]:
    """The sorted union of ascending id lists, and for each list where its ids sit in it: one stable sort
    of all the ids (it merges their runs) gives both, where a binary search per list would cost a
    logarithm per id on top of the union."""
    doc_ids = np.concatenate(lists)
    order = np.argsort(doc_ids, kind='stable')
    ordered = doc_ids[order]
    first = np.empty(len(ordered), dtype=bool)
    first[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    slots = np.empty(len(ordered), dtype=np.intp)
    slots[order] = np.cumsum(first) - 1
    ends = np.cumsum([len(ids) for ids in lists])
    return np.compress(first, ordered), np.split(slots, ends[:-1])


def found_in(doc_ids: NDArray[np.int64], wanted: NDArray[np.int64]) -> tuple[NDArray[np.intp], NDArray[np.bool_]]:
    """Where each of the `wanted` ids sits in ascending `doc_ids`, and whether it is there (a position is
    meaningless where it is not): one binary search per id, for a few ids against a long list."""
    if not len(doc_ids):
        return np.zeros(len(wanted), dtype=np.intp), np.zeros(len(wanted), dtype=bool)
    at = np.minimum(np.searchsorted(doc_ids, wanted), len(doc_ids) - 1)
    return at, doc_ids[at] == wanted


def union_of(lists: Sequence[NDArray[np.int64]]) -> NDArray[np.int64]:
    """The sorted union of ascending id lists: a stable sort merges their runs in about linear time, where
    `np.unique` hashes every id (a hundred times slower at a million ids on numpy 2)."""
    doc_ids = np.concatenate(lists)
    doc_ids.sort(kind='stable')
    return np.compress(np.concatenate(([True], doc_ids[1:] != doc_ids[:-1])), doc_ids) if len(doc_ids) else doc_ids


def at_least_kth(
    doc_ids: NDArray[np.int64], scores: NDArray[np.float64], limit: int
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """The documents scoring at least the `limit`-th best score."""
    if len(scores) <= limit:
        return doc_ids, scores
    kth = np.partition(scores, len(scores) - limit)[len(scores) - limit]
    chosen = np.flatnonzero(scores >= kth)
    return doc_ids[chosen], scores[chosen]
