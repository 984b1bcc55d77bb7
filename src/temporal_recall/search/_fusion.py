"""Fusing the BM25 ranking with the nearest vectors into one list, and which ranking found each document.

`fuse`, what a hybrid search uses, adds each ranking's scores scaled to its best one, BM25 weighing less
because its list holds every document sharing any word with the query; `reciprocal_rank_fusion` is the
alternative it was measured against. `above_floor` then drops a document found by meaning alone far
below the best cosine a page can show. docs/design/semantic.md ("Fusion", "The meaning floor") has the reasons.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from temporal_recall._search_terms import Arm
from temporal_recall.search._bm25 import ScoredDocument

__all__ = ('BM25_WEIGHT', 'MEANING_FLOOR', 'RRF_K', 'Fused', 'above_floor', 'fuse', 'reciprocal_rank_fusion')

BM25_WEIGHT = 0.3
"""BM25's share of a fused score (the nearest vectors have the rest), chosen on bench/semantic."""

RRF_K = 60
"""Reciprocal Rank Fusion's rank offset (the paper's constant)."""

MEANING_FLOOR = 0.4
"""How close a document found by meaning alone must come to the nearest one to be a hybrid hit: its cosine
at least this share of the best cosine a page can show (a share, not a cosine, so it holds for any
embedder's range of cosines). Chosen on bench/semantic's labelled set with the local model, in the gap
between the shares of the documents the words miss on exact-id questions (noise there) and of the
paraphrased messages only meaning finds, nearer the noise; `python -m bench.semantic --floors` measures
it, and docs/design/semantic.md has the numbers."""

Fused = tuple[list[ScoredDocument], dict[int, list[Arm]]]
"""The fused ranking, best first (ties: the smaller `doc_id`, as in BM25), and each document's rankings."""


def _ranked(scores: dict[int, float], arms: dict[int, list[Arm]]) -> Fused:
    fused = [ScoredDocument(doc_id, score) for doc_id, score in scores.items()]
    fused.sort(key=lambda scored: (-scored.score, scored.doc_id))
    return fused, arms


def fuse(rankings: Mapping[Arm, Sequence[ScoredDocument]], *, bm25_weight: float = BM25_WEIGHT) -> Fused:
    """The documents of `rankings` (each best first) by their scores scaled to each ranking's best, weighted."""
    scores: dict[int, float] = {}
    arms: dict[int, list[Arm]] = {}
    for arm, ranked in rankings.items():
        best = max((scored.score for scored in ranked), default=0.0)
        weight = bm25_weight if arm == 'bm25' else 1 - bm25_weight
        for scored in ranked:
            share = weight * scored.score / best if best > 0 else 0.0
            scores[scored.doc_id] = scores.get(scored.doc_id, 0.0) + share
            arms.setdefault(scored.doc_id, []).append(arm)
    return _ranked(scores, arms)


def above_floor(fused: Fused, nearest: Sequence[ScoredDocument], best: float, *, floor: float | None = None) -> Fused:
    """`fused` without the documents only the `semantic` ranking found whose cosine (in `nearest`) is below
    `floor * best` (`MEANING_FLOOR` by default), `best` being the best cosine a page can show; with `best` at
    0 or below nothing is near, and none of them is kept. A document the words found stays whatever its cosine."""
    floor = MEANING_FLOOR if floor is None else floor
    cosines = {scored.doc_id: scored.score for scored in nearest}
    ranked, arms = fused
    kept = [
        scored
        for scored in ranked
        if arms[scored.doc_id] != ['semantic'] or (best > 0 and cosines[scored.doc_id] >= floor * best)
    ]
    return kept, {scored.doc_id: arms[scored.doc_id] for scored in kept}


def reciprocal_rank_fusion(rankings: Mapping[Arm, Sequence[ScoredDocument]], *, k: int = RRF_K) -> Fused:
    """The documents of `rankings` (each best first) by their summed reciprocal ranks `1 / (k + rank)`."""
    scores: dict[int, float] = {}
    arms: dict[int, list[Arm]] = {}
    for arm, ranked in rankings.items():
        for rank, scored in enumerate(ranked, start=1):
            scores[scored.doc_id] = scores.get(scored.doc_id, 0.0) + 1.0 / (k + rank)
            arms.setdefault(scored.doc_id, []).append(arm)
    return _ranked(scores, arms)
