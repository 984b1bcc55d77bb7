"""`above_floor`: what a hybrid search keeps of the documents only the nearest vectors found."""

from __future__ import annotations

from temporal_recall.search._bm25 import ScoredDocument
from temporal_recall.search._fusion import MEANING_FLOOR, above_floor, fuse

WORDS = [ScoredDocument(1, 6.0), ScoredDocument(4, 1.0)]
MEANING = [ScoredDocument(1, 0.6), ScoredDocument(2, 0.3), ScoredDocument(3, 0.2), ScoredDocument(4, -0.1)]
"""Document 1 holds the query's words and is nearest; 2 is half as near, 3 a third; 4 holds a word, far off."""


def _kept(best: float, **floor: float) -> tuple[list[int], dict[int, list[str]]]:
    ranked, arms = above_floor(fuse({'bm25': WORDS, 'semantic': MEANING}), MEANING, best, **floor)
    return [scored.doc_id for scored in ranked], {doc_id: list(found) for doc_id, found in arms.items()}


def test_a_document_only_meaning_found_is_kept_near_the_best_cosine() -> None:
    assert MEANING_FLOOR == 0.4
    ranked, arms = _kept(0.6)
    assert ranked == [1, 2, 4]  # 3 is 0.33 of the best; 4 is found by its words, whatever its cosine
    assert arms == {1: ['bm25', 'semantic'], 2: ['semantic'], 4: ['bm25', 'semantic']}
    assert _kept(0.6, floor=0.3)[0] == [1, 2, 3, 4]


def test_the_best_is_what_a_page_can_show() -> None:
    assert _kept(0.9)[0] == [1, 4]  # a nearer document left out of the page (another run) raises the bar
    assert _kept(0.3)[0] == [1, 2, 3, 4]
    assert _kept(0.0)[0] == [1, 4]  # nothing can be shown near the query: meaning alone finds nothing
