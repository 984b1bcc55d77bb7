"""The BM25 array kernel (`search._bm25_arrays`) computes the row-by-row ranking's floats, bit for bit."""

from __future__ import annotations

import random

import pytest

from temporal_recall.search._bm25_arrays import array_weights, best_scores


@pytest.mark.parametrize('spread', [1, 200], ids=['dense-ids', 'sparse-ids'])
def test_array_sums_equal_the_row_sums_bit_for_bit(spread: int):
    """Both ways `best_scores` adds weights (by id, or over the sorted union of ids) give `summed`'s floats."""
    import numpy as np

    from temporal_recall.search._bm25 import summed

    rng = random.Random(spread)
    weighted = []
    for _ in range(4):
        docs = sorted(rng.sample(range(1000, 1000 + 400 * spread), 300))
        weights = [rng.uniform(0.01, 9.0) for _ in docs]
        weighted.append((np.array(docs, dtype=np.int64), np.array(weights)))
    doc_ids, scores = best_scores(weighted, 10**6)
    order = np.argsort(doc_ids)
    expected = summed(dict(zip(docs.tolist(), weights.tolist(), strict=True)) for docs, weights in weighted)
    assert doc_ids[order].tolist() == sorted(expected)
    assert scores[order].tolist() == [expected[doc_id] for doc_id in sorted(expected)]


@pytest.mark.parametrize('spread', [1, 200], ids=['dense-ids', 'sparse-ids'])
@pytest.mark.parametrize('limit', [1, 3, 10, 64, 500])
def test_the_candidates_are_every_document_reaching_the_kth_score_ties_included(spread: int, limit: int):
    """`best_scores` keeps exactly the documents scoring at least the `limit`-th best sum: none of the page
    is lost to the sampled floor, and documents tied with the last one on the page are all kept."""
    import numpy as np

    from temporal_recall.search._bm25 import summed

    rng = random.Random(limit * spread)
    weighted = []
    for _ in range(3):
        docs = sorted(rng.sample(range(1, 1 + 2_000 * spread), 1_500))
        weights = [rng.choice((0.5, 1.0, 1.5, 2.0)) for _ in docs]  # Few distinct sums: ties everywhere.
        weighted.append((np.array(docs, dtype=np.int64), np.array(weights)))
    doc_ids, scores = best_scores(weighted, limit)
    expected = summed(dict(zip(docs.tolist(), weights.tolist(), strict=True)) for docs, weights in weighted)
    kth = sorted(expected.values(), reverse=True)[limit - 1]
    assert sorted(doc_ids.tolist()) == sorted(doc_id for doc_id, score in expected.items() if score >= kth)
    assert dict(zip(doc_ids.tolist(), scores.tolist(), strict=True)) == {
        doc_id: expected[doc_id] for doc_id in doc_ids.tolist()
    }


@pytest.mark.parametrize('average_length', [0.0, 1.0, 37.25, 412.8])
@pytest.mark.parametrize(('k1', 'b'), [(1.5, 0.75), (0.0, 0.0), (2.2, 1.0), (0.9, 0.3)])
def test_array_weights_equal_the_row_weights_bit_for_bit(average_length: float, k1: float, b: float):
    """`array_weights` evaluates `term_weights`' formula in place on arrays: every weight is the same float."""
    import numpy as np

    from temporal_recall.search._bm25 import BM25Parameters, term_weights
    from temporal_recall.store import Posting

    rng = random.Random(f'{average_length}/{k1}/{b}')
    postings = [Posting(doc_id, rng.randint(1, 60), rng.randint(0, 5000)) for doc_id in range(1, 2001)]
    idf = rng.uniform(0.01, 12.0)
    expected = term_weights(idf, postings, average_length, BM25Parameters(k1=k1, b=b))
    frequencies = np.array([p.term_frequency for p in postings], dtype=np.uint32)
    lengths = np.array([p.length for p in postings], dtype=np.uint32)
    weights = array_weights(frequencies, lengths, idf, k1, b, average_length)
    assert weights.tolist() == [expected[p.doc_id] for p in postings]


@pytest.mark.parametrize('size', [10, 16, 17, 400, 5000])
@pytest.mark.parametrize('limit', [1, 3, 10])
def test_kth_largest_is_the_kth_of_every_value_ties_and_zeros_included(size: int, limit: int):
    """`kth_largest` selects among the values reaching a sampled floor: whatever the sample holds (a few
    distinct values, many ties, zeros, the top `limit` all outside it), the answer is the full selection's."""
    import numpy as np

    from temporal_recall.search._bm25_arrays import kth_largest

    rng = random.Random(size * 31 + limit)
    for values in (
        np.array([rng.choice([0.0, 0.5, 1.5, 2.0]) for _ in range(size)]),
        np.array([rng.uniform(0.0, 9.0) for _ in range(size)]),
        np.concatenate((np.zeros(size - limit), np.arange(1, limit + 1, dtype=np.float64))),
    ):
        rng.shuffle(values)
        assert kth_largest(values, limit) == sorted(values.tolist(), reverse=True)[limit - 1]


def test_slots_in_union_place_each_list_in_the_sorted_union():
    """`slots_in_union` gives the sorted union of ascending lists (shared ids once) and, per list, the
    positions of its ids in it, for empty lists and lists with no id in common as well."""
    import numpy as np

    from temporal_recall.search._bm25_arrays import slots_in_union

    rng = random.Random(5)
    for _ in range(50):
        lists = [
            np.array(sorted(rng.sample(range(rng.randint(0, 3) * 1000, 4000), rng.randint(0, 60))), dtype=np.int64)
            for _ in range(rng.randint(1, 5))
        ]
        union, slots = slots_in_union(lists)
        assert union.tolist() == sorted({int(doc_id) for ids in lists for doc_id in ids})
        assert len(slots) == len(lists)
        for ids, at in zip(lists, slots, strict=True):
            assert union[at].tolist() == ids.tolist()
