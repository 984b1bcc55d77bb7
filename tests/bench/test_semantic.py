"""The quality benchmark's done-when, on the labelled set with the local model (deterministic: no timing)."""

from __future__ import annotations

from bench.semantic import measure, measure_floors

from temporal_recall.search._fusion import MEANING_FLOOR


async def test_hybrid_finds_paraphrases_and_keeps_exact_ids_first() -> None:
    found = await measure()
    paraphrase, exact = found['paraphrase'], found['exact id']
    assert paraphrase['hybrid']['recall@5'] >= 0.85
    assert paraphrase['hybrid']['recall@5'] >= 1.5 * paraphrase['bm25']['recall@5']
    assert exact['hybrid']['recall@1'] >= exact['bm25']['recall@1']


async def test_the_meaning_floor_leaves_exact_ids_only_their_words_and_paraphrase_recall_as_it_was() -> None:
    found = await measure_floors((0.0, MEANING_FLOOR))
    below, at = found['floors']
    assert (
        max(share for share, _ in found['exact id noise'])
        < MEANING_FLOOR
        < min(share for share, _ in found['paraphrase'])
    )
    assert at['exact id meaning-only hits'] == 0 < below['exact id meaning-only hits']
    assert at['paraphrase recall@5'] == below['paraphrase recall@5'] == 1.0
    assert at['paraphrase recall@1'] == below['paraphrase recall@1']
    assert at['exact id recall@1'] == below['exact id recall@1']
