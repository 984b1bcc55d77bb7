"""The exact BM25 top-k of a scope-wide search from the top tiers of long posting lists (`store.postings._tiers`).

A tiered term's postings outside its tier weigh at most its frontier's best pair under this search's
parameters and statistics (`rest`). So every document scores at least what the postings read give it
(`lower`), and at most that plus the `rest` of each tiered term it was not read under (`upper`). The
`limit`-th best lower bound is at most the page's last score: a document whose upper bound is below it
cannot be on the page, nor tie with it. If no document outside the tiers can reach it either, the few
documents left in doubt have their postings of the other terms looked up, and the page is ranked by
`rank_columns` over documents whose every posting is known: the same additions in the same order as the
exhaustive ranking, so the same hits, scores and ties. Otherwise (or when too much is left in doubt) the
store reads every posting and the ranking is the exhaustive one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from temporal_recall.search._bm25 import BM25Parameters, ScoredDocument, term_idf
from temporal_recall.search._bm25_arrays import array_weights, rank_columns
from temporal_recall.store.protocol import PostingColumns, TieredPostings

__all__ = ('LOOKUP_ROUND', 'MOST_LOOKUPS', 'SAFETY', 'TierPruning')

MOST_LOOKUPS = 8192
"""The most (term, document) postings a search looks up; past that it reads every posting instead."""

LOOKUP_ROUND = 512
"""The most documents in doubt looked up at once, those of highest upper bound first: their exact scores
raise the threshold, which often rules out the rest without reading them."""

SAFETY = 1e-9
"""How far below the threshold (relative) a bound must lie to rule a document out: the bounds add the
same weights in another order than the ranking, which may differ in the last bits."""


@dataclass
class _Term:
    name: str
    doc_ids: NDArray[np.int64]
    weights: NDArray[np.float64]
    rest: float | None
    """The most a posting outside `doc_ids` weighs; `None` when `doc_ids` is the whole list."""


@dataclass
class TierPruning:
    """One pruned ranking: the store calls `lookups` (`TieredIndex.tiered_postings`) until it answers `{}`
    (the page is proven) or `None` (read every posting), then `rank` ranks what it read."""

    terms: Sequence[str]
    parameters: BM25Parameters
    limit: int
    _asked: dict[str, NDArray[np.int64]] = field(default_factory=dict[str, 'NDArray[np.int64]'], init=False)
    """The documents looked up under each term so far, found or not."""
    _exact: NDArray[np.int64] | None = field(default=None, init=False)

    def _weighted(self, read: TieredPostings) -> list[_Term]:
        stats = read.stats
        average_length = stats.total_length / stats.document_count
        k1, b = self.parameters.k1, self.parameters.b
        found: list[_Term] = []
        for name in dict.fromkeys(self.terms):
            columns = _merged(read.known.get(name), read.looked_up.get(name))
            frontier = read.frontiers.get(name)
            if columns is None and frontier is None:
                continue
            idf = term_idf(stats.document_count, read.frequencies[name])
            if columns is None:
                doc_ids, weights = np.empty(0, dtype=np.int64), np.empty(0)
            else:
                keep = columns.term_frequencies > 0
                doc_ids = columns.doc_ids[keep]
                frequencies, lengths = columns.term_frequencies[keep], columns.lengths[keep]
                weights = array_weights(frequencies, lengths, idf, k1, b, average_length)
            rest = None
            if frontier is not None:
                rest = float(array_weights(frontier[:, 0], frontier[:, 1], idf, k1, b, average_length).max(initial=0.0))
            found.append(_Term(name, doc_ids, weights, rest))
        return found

    def lookups(self, read: TieredPostings) -> Mapping[str, NDArray[np.int64]] | None:
        """The documents (ascending) whose postings of each tiered term to read next: `{}` once the page is
        proven, `None` when it cannot be (read every posting)."""
        if read.stats.document_count <= 0:
            return {}
        weighted = self._weighted(read)
        if not any(term.rest for term in weighted):
            return {}  # Every list read whole (or every tier holds its whole list).
        candidates = np.unique(np.concatenate([term.doc_ids for term in weighted]))
        lower = np.zeros(len(candidates))
        missing = np.zeros(len(candidates))
        unread: dict[str, NDArray[np.bool_]] = {}
        for term in weighted:
            at = np.searchsorted(candidates, term.doc_ids)
            lower[at] += term.weights
            if term.rest:
                unknown = np.ones(len(candidates), dtype=bool)
                unknown[at] = False
                asked = self._asked.get(term.name)
                if asked is not None:
                    unknown &= ~np.isin(candidates, asked, assume_unique=True)
                missing[unknown] += term.rest
                unread[term.name] = unknown
        outside = sum(term.rest or 0.0 for term in weighted)
        if len(candidates) < self.limit:
            return None  # Fewer documents read than the page holds: one outside every tier may be on it.
        threshold = float(np.partition(lower, len(lower) - self.limit)[len(lower) - self.limit])
        floor = threshold * (1 - SAFETY)
        upper = lower + missing
        doubtful = (missing > 0) & (upper >= floor)
        if not doubtful.any():
            if outside >= floor:
                return None  # A document outside every tier might still reach the page.
            self._exact = candidates[missing == 0]
            return {}
        # The likeliest to reach the page first: their exact scores raise the threshold the most.
        chosen = np.flatnonzero(doubtful)
        chosen = chosen[np.argsort(-upper[chosen], kind='stable')[:LOOKUP_ROUND]]
        pick = np.zeros(len(candidates), dtype=bool)
        pick[chosen] = True
        asked_now = {name: candidates[pick & unknown] for name, unknown in unread.items()}
        asked_now = {name: doc_ids for name, doc_ids in asked_now.items() if len(doc_ids)}
        if sum(len(doc_ids) for doc_ids in (*self._asked.values(), *asked_now.values())) > MOST_LOOKUPS:
            return None
        for name, doc_ids in asked_now.items():
            before = self._asked.get(name)
            self._asked[name] = doc_ids if before is None else np.union1d(before, doc_ids)
        return asked_now

    def rank(self, read: TieredPostings) -> list[ScoredDocument]:
        """The page: ranked among the documents whose every posting was read (all of them when the store
        read every posting)."""
        columns: dict[str, PostingColumns] = dict(read.known)
        if read.frontiers and self._exact is not None:
            columns = {}
            for name in read.known.keys() | read.looked_up.keys():
                merged = _merged(read.known.get(name), read.looked_up.get(name))
                assert merged is not None
                columns[name] = _among(merged, self._exact)
        return rank_columns(read.stats, columns, read.frequencies, self.terms, self.parameters, self.limit)


def _among(columns: PostingColumns, doc_ids: NDArray[np.int64]) -> PostingColumns:
    keep = np.isin(columns.doc_ids, doc_ids, assume_unique=True)
    return PostingColumns(columns.doc_ids[keep], columns.term_frequencies[keep], columns.lengths[keep])


def _merged(known: PostingColumns | None, looked_up: PostingColumns | None) -> PostingColumns | None:
    """`known` and `looked_up` postings of one term, ascending ids, each document once."""
    if known is None:
        return looked_up
    if looked_up is None or not len(looked_up.doc_ids):
        return known
    doc_ids = np.concatenate((known.doc_ids, looked_up.doc_ids))
    doc_ids, once = np.unique(doc_ids, return_index=True)
    frequencies = np.concatenate((known.term_frequencies, looked_up.term_frequencies))[once]
    lengths = np.concatenate((known.lengths, looked_up.lengths))[once]
    return PostingColumns(doc_ids, frequencies, lengths)
