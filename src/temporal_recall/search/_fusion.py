"""Fusing the BM25 ranking with the nearest vectors: one list, and which ranking found each document.

Reciprocal Rank Fusion (Cormack, Clarke and Büttcher, 2009): a document scores `1 / (k + rank)` in
each ranking it is in (ranks from 1), summed. It needs no calibration between BM25 scores, which
grow with a term's rarity, and cosines, which sit in a narrow band for any text. `k = 60` is the
paper's constant. bench/semantic measures it against the two rankings alone.

Pure: importable in the workflow sandbox like the rest of `search`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from temporal_recall.search._bm25 import ScoredDocument
from temporal_recall.search._results import Arm

__all__ = ('FUSION_K', 'fuse')

FUSION_K = 60
"""RRF's rank offset: how gently the score falls with the rank (larger: flatter)."""


def fuse(
    rankings: Mapping[Arm, Sequence[ScoredDocument]], *, k: int = FUSION_K
) -> tuple[list[ScoredDocument], dict[int, list[Arm]]]:
    """The documents of `rankings` (each best first) by their summed reciprocal ranks, best first (ties:
    the smaller `doc_id`, as in BM25), and for each document the rankings that held it, in `rankings` order."""
    scores: dict[int, float] = {}
    arms: dict[int, list[Arm]] = {}
    for arm, ranked in rankings.items():
        for rank, scored in enumerate(ranked, start=1):
            scores[scored.doc_id] = scores.get(scored.doc_id, 0.0) + 1.0 / (k + rank)
            arms.setdefault(scored.doc_id, []).append(arm)
    fused = [ScoredDocument(doc_id, score) for doc_id, score in scores.items()]
    fused.sort(key=lambda scored: (-scored.score, scored.doc_id))
    return fused, arms
