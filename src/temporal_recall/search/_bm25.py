"""Okapi BM25 over postings a backend fetched.

Ranking lives here rather than in SQL so that SQLite and PostgreSQL order results identically, and so
that the exact formula can be checked against a from-the-definition reference in the tests. A backend
only has to hand over, for each query term, the documents containing it with their term frequency
and length, plus the document count and total length of everything the search may see.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from temporal_recall.errors import InvalidSearchParameters
from temporal_recall.store.protocol import IndexStats, Posting

__all__ = ('DEFAULT_PARAMETERS', 'BM25Parameters', 'ScoredDocument', 'idf', 'rank')


def _is_number(value: object) -> bool:
    # bool is an int subclass, but `k1=True` is a mistake, not a number.
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, kw_only=True)
class BM25Parameters:
    """The two BM25 knobs, checked when built so a bad value fails at the caller, not mid-ranking.

    `k1` is how quickly repeating a term stops adding score (0: presence is all that counts);
    `b` is how much a long document is penalised for its length (0: not at all, 1: fully).
    """

    k1: float = 1.5
    b: float = 0.75

    def __post_init__(self) -> None:
        if not _is_number(self.k1) or not math.isfinite(self.k1) or self.k1 < 0:
            raise InvalidSearchParameters(
                f'BM25 parameter k1={self.k1!r} is out of range: use a finite number >= 0 (the default is 1.5).'
            )
        if not _is_number(self.b) or not 0 <= self.b <= 1:
            raise InvalidSearchParameters(
                f'BM25 parameter b={self.b!r} is out of range: use a number from 0 to 1 inclusive '
                '(the default is 0.75).'
            )


DEFAULT_PARAMETERS = BM25Parameters()
"""The customary Okapi defaults, `k1=1.5, b=0.75`."""


@dataclass(frozen=True)
class ScoredDocument:
    doc_id: int
    score: float


def idf(document_count: int, document_frequency: int) -> float:
    """Inverse document frequency, in the `+ 1` form that never goes negative.

    The classic Robertson-Sparck Jones weight turns negative for a term in more than half of the
    documents, which would make matching a common word worse than not matching it at all.
    """
    if document_count < 0 or document_frequency < 0:
        raise ValueError(
            f'idf needs non-negative counts, got document_count={document_count}, '
            f'document_frequency={document_frequency}.'
        )
    return math.log((document_count - document_frequency + 0.5) / (document_frequency + 0.5) + 1)


def term_weights(
    term_idf: float, postings: Iterable[Posting], average_length: float, parameters: BM25Parameters
) -> dict[int, float]:
    """One term's contribution to the score of each document of `postings` (a term frequency of 0 or less
    adds nothing): the single place the BM25 formula is written (`_plan._rank_columns` evaluates
    the same operations in the same order on arrays).

    One comprehension over the list rather than a call per posting: a common term has tens of
    thousands of postings, and the call would cost more than the arithmetic. The operations are the
    formula's, in its order, so every caller gets the same floating-point weight for a posting.
    """
    k1 = parameters.k1
    k1_plus_1 = k1 + 1
    one_minus_b = 1 - parameters.b
    b = parameters.b
    if average_length > 0:
        return {
            doc_id: term_idf * tf * k1_plus_1 / (tf + k1 * (one_minus_b + b * dl / average_length))
            for doc_id, tf, dl in postings
            if tf > 0
        }
    return {doc_id: term_idf * tf * k1_plus_1 / (tf + k1 * (one_minus_b + 0.0)) for doc_id, tf, _ in postings if tf > 0}


def summed(per_term: Iterable[Mapping[int, float]]) -> dict[int, float]:
    """Each document's score: its term weights added in the order `per_term` gives the terms.

    The one place scores are summed, so a pruned search's bounds and the final ranking add the same
    floating-point numbers in the same order. The first term's weights are copied rather than added
    to 0.0 one by one, which gives the same values.
    """
    scores: dict[int, float] = {}
    for weights in per_term:
        if not scores:
            scores = dict(weights)
            continue
        for doc_id, weight in weights.items():
            scores[doc_id] = scores.get(doc_id, 0.0) + weight
    return scores


def term_idf(document_count: int, document_frequency: int) -> float:
    """The idf `rank` uses, including its guard for a frequency above the document count."""
    return idf(max(document_count, document_frequency), document_frequency)


def rank(
    stats: IndexStats,
    postings: Mapping[str, Sequence[Posting]],
    terms: Sequence[str],
    *,
    parameters: BM25Parameters = DEFAULT_PARAMETERS,
    limit: int,
    document_frequencies: Mapping[str, int] | None = None,
) -> list[ScoredDocument]:
    """The `limit` best documents for `terms`, best first, ties broken by smaller `doc_id` first.

    Each distinct term counts once, however often the query repeats it, and the per-term scores are
    added in the order `terms` gives them, so the floating-point result is reproducible.

    Edge cases, all of which only arise when the stats and postings disagree (for example when a
    write landed between the backend's two reads) or the target is empty:

    - no documents (`document_count == 0`): no results;
    - a term found in more documents than `document_count` says exist: the count is raised to that
      document frequency for that term, so its idf stays positive instead of rewarding absence;
    - an average document length of 0: the length ratio `dl / avgdl` is taken as 0 instead of
      dividing by zero, so length normalisation drops out and every matching document scores as
      the shortest possible one;
    - postings with a term frequency of 0 or less add nothing.

    `document_frequencies` gives each term's frequency over the whole target when `postings` holds
    only some of its postings (the candidates of a pruned search); by default it is the list length.

    Cost is one pass over the postings plus a bounded heap selection, `O(P + n log limit)`.
    """
    if not _is_count(limit) or limit < 1:
        raise InvalidSearchParameters(f'limit={limit!r} is out of range: ask for at least 1 result.')
    document_count = stats.document_count
    if document_count <= 0:
        return []
    average_length = stats.total_length / document_count

    per_term: list[dict[int, float]] = []
    for term in dict.fromkeys(terms):
        term_postings = postings.get(term)
        if not term_postings:
            continue
        document_frequency = len(term_postings)
        if document_frequencies is not None:
            document_frequency = document_frequencies.get(term, document_frequency)
        per_term.append(
            term_weights(term_idf(document_count, document_frequency), term_postings, average_length, parameters)
        )
    scores = summed(per_term)

    best = heapq.nsmallest(limit, scores.items(), key=lambda item: (-item[1], item[0]))
    return [ScoredDocument(doc_id, score) for doc_id, score in best]
