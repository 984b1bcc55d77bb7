"""The quality benchmark's done-when, on the labelled set with the local model (deterministic: no timing)."""

from __future__ import annotations

from bench.semantic import measure


async def test_hybrid_finds_paraphrases_and_keeps_exact_ids_first() -> None:
    found = await measure()
    paraphrase, exact = found['paraphrase'], found['exact id']
    assert paraphrase['hybrid']['recall@5'] >= 0.85
    assert paraphrase['hybrid']['recall@5'] >= 1.5 * paraphrase['bm25']['recall@5']
    assert exact['hybrid']['recall@1'] >= exact['bm25']['recall@1']
