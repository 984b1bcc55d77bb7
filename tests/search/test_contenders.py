"""`search._contenders` keeps every document whose upper bound can reach the floor, with exact lower bounds,
on random lists: what a pruned search leaves out could never have been on its page or in doubt."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from temporal_recall.search import _contenders
from temporal_recall.search._bm25_arrays import kth_largest, slots_in_union, union_of
from temporal_recall.search._contenders import contenders
from temporal_recall.search._pruned import SAFETY

SMALL_RANKS = tuple(2**power for power in range(12))
"""Levels from a single posting on, so that lists this small have thresholds to choose among."""

Lists = list[tuple[NDArray[np.int64], NDArray[np.float64], float]]


def _lists(seed: int, count: int, size: int, whole: int) -> Lists:
    """`count` lists of up to `size` postings over a shared range of ids (so documents recur across lists),
    with skewed weights; the first `whole` are whole lists (rest 0), the others tiers with a rest below
    most of their weights."""
    rng = np.random.default_rng(seed)
    lists: Lists = []
    for number in range(count):
        length = int(rng.integers(0, size + 1))  # A tier can be read empty (gone meanwhile, its list read whole).
        doc_ids = np.sort(rng.choice(4 * size, size=min(length, 4 * size), replace=False)).astype(np.int64)
        weights = rng.gamma(0.6, 1.0, size=len(doc_ids)) * float(rng.uniform(0.1, 3.0))
        rest = 0.0 if number < whole or not len(weights) else float(np.quantile(weights, rng.uniform(0.0, 0.9)))
        lists.append((doc_ids, weights, rest))
    return lists


def _exhaustive(lists: Lists, limit: int) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64], float]:
    """Every document's lower and upper bound as the pruned search makes them over every list, and the floor."""
    doc_ids, slots = slots_in_union([ids for ids, _, _ in lists])
    lower = np.zeros(len(doc_ids))
    missing = np.zeros(len(doc_ids))
    for (_, weights, rest), at in zip(lists, slots, strict=True):
        lower[at] += weights
        if rest:
            unread = np.ones(len(doc_ids), dtype=bool)
            unread[at] = False
            missing += unread * rest
    return doc_ids, lower, lower + missing, kth_largest(lower, limit) * (1 - SAFETY)


def _spread_too_wide(lists: Lists) -> bool:
    """Whether the lists share documents but their ids span more than `_strong_enough` counts (it answers
    `None` then)."""
    return sum(1 for ids, _, _ in lists if len(ids)) >= 2 and _contenders.counted_span(lists) is None


def _first_choice(lists: Lists, limit: int, first: int, every: int) -> NDArray[np.int64]:
    """The documents of `contenders`' first choice."""
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(_contenders, '_SAMPLE_EVERY', every)
        patched.setattr(_contenders, '_RANKS', SMALL_RANKS)
        thresholds = [_contenders._at_rank(_contenders._levels(w - r), max(first, limit)) for _, w, r in lists]
    return union_of([ids[w - r >= t] for (ids, w, r), t in zip(lists, thresholds, strict=True)])


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    count=st.integers(1, 5),
    size=st.sampled_from([8, 64, 600]),
    whole=st.integers(0, 2),
    limit=st.sampled_from([1, 3, 10]),
    first=st.sampled_from([1, 4, _contenders._FIRST]),
    every=st.sampled_from([1, 3, _contenders._SAMPLE_EVERY]),
    tried=st.sampled_from(['both', 'thresholds', 'shared']),
)
def test_every_document_that_can_reach_the_floor_is_kept(
    seed: int, count: int, size: int, whole: int, limit: int, first: int, every: int, tried: str
):
    lists = _lists(seed, count, size, min(whole, count - 1))
    thresholds_tried, shared_tried = tried != 'shared', tried != 'thresholds'
    with pytest.MonkeyPatch.context() as patched:
        if not thresholds_tried:  # The strong postings alone, whatever thresholds could do.
            patched.setattr(_contenders, '_above_thresholds', lambda *_: None)
        if not shared_tried:  # Thresholds alone, whatever the strong postings could do (and in either order).
            patched.setattr(_contenders, '_strong_enough', lambda *_: None)
        patched.setattr(_contenders, '_FIRST', first)
        patched.setattr(_contenders, '_SAMPLE_EVERY', every)
        patched.setattr(_contenders, 'MOST_KEPT', 1.0)
        patched.setattr(_contenders, '_RANKS', SMALL_RANKS)
        chosen = contenders(lists, limit, SAFETY)
    if len(slots_in_union([ids for ids, _, _ in lists])[0]) < limit:
        assert chosen is None
        return
    doc_ids, lower, upper, floor = _exhaustive(lists, limit)
    rests = sum(rest for _, _, rest in lists)
    if chosen is None:  # Only when the documents a floor is taken from are too few, or none rise above the rests.
        if shared_tried and not _spread_too_wide(lists):
            held = sum(np.isin(doc_ids, ids) for ids, _, _ in lists)
            shared = lower[held > 1]
            assert len(shared) < limit or kth_largest(shared, limit) * (1 - 2 * SAFETY) <= rests
        if thresholds_tried:
            first_lower = lower[np.isin(doc_ids, _first_choice(lists, limit, first, every))]
            assert len(first_lower) < limit or kth_largest(first_lower, limit) * (1 - 2 * SAFETY) <= rests
        return
    assert np.all(chosen.doc_ids[1:] > chosen.doc_ids[:-1])
    at = np.searchsorted(doc_ids, chosen.doc_ids)
    assert np.array_equal(doc_ids[at], chosen.doc_ids), 'a document no list holds'
    assert np.array_equal(chosen.lower, lower[at]), 'lower bounds differ from the sums over every list'
    reaching = doc_ids[upper >= floor]
    assert np.isin(reaching, chosen.doc_ids).all(), 'a document that can reach the floor was left out'
    assert kth_largest(chosen.lower, limit) * (1 - SAFETY) == floor, 'the floor moved'
    for (ids, _, _), held in zip(lists, chosen.held, strict=True):
        assert np.array_equal(held, np.isin(chosen.doc_ids, ids))


def _far_above_the_rest(seed: int, count: int) -> Lists:
    """`count` tiers of 20,000 of 200,000 documents weighing 0.5-1.0 over a rest of 0.5, and ten documents every
    one holds weighing 3.0 in each."""
    rng = np.random.default_rng(seed)
    strong = np.arange(0, 200_000, 20_000, dtype=np.int64)
    lists: Lists = []
    for _ in range(count):
        doc_ids = np.union1d(rng.choice(200_000, size=20_000, replace=False), strong).astype(np.int64)
        weights = rng.uniform(0.5, 1.0, size=len(doc_ids))
        weights[np.searchsorted(doc_ids, strong)] = 3.0
        lists.append((doc_ids, weights, 0.5))
    return lists


def test_most_documents_are_left_out_where_the_best_stand_far_above_the_rest():
    """Two tiers of 20,000 documents weighing 0.5-1.0 over a rest of 0.5, and ten documents both hold weighing 3.0
    in each: a few hundred of the 40,000 documents are kept, and every one that can reach the page."""
    lists = _far_above_the_rest(7, 2)
    chosen = contenders(lists, 10, SAFETY)
    assert chosen is not None
    doc_ids, _, upper, floor = _exhaustive(lists, 10)
    assert np.isin(doc_ids[upper >= floor], chosen.doc_ids).all()
    assert len(chosen.doc_ids) < 1_000


@pytest.mark.parametrize('count', [2, 3, 4])
def test_from_three_lists_the_strong_postings_are_chosen_first(count: int):
    """Where both choices succeed and keep different documents, two lists keep what thresholds keep, and from
    `STRONG_FIRST` lists on what the strong postings keep: with several common words, thresholds rule out little."""
    lists = _far_above_the_rest(11, count)
    excesses = [weights - rest for _, weights, rest in lists]
    by_thresholds = _contenders._above_thresholds(lists, excesses, 10, SAFETY)
    by_strong = _contenders._strong_enough(lists, excesses, 10, SAFETY)
    assert by_thresholds is not None and by_strong is not None
    assert not np.array_equal(by_thresholds.doc_ids, by_strong.doc_ids)  # The order shows.
    chosen = contenders(lists, 10, SAFETY)
    assert chosen is not None
    expected = by_strong if count >= 3 else by_thresholds
    assert np.array_equal(chosen.doc_ids, expected.doc_ids)
    assert np.array_equal(chosen.lower, expected.lower)


def test_documents_several_lists_hold_are_left_out_when_none_of_their_postings_is_strong_enough():
    """Four tiers of 20,000 of 200,000 documents: about 10,000 are held by two lists or more, weighing 0.5-1.0
    over a rest of 0.5 in each, and ten every list holds weigh 3.0 in each. Only the documents with a posting
    whose excess, times the number of lists holding the document, reaches the floor are kept: a few dozen."""
    lists = _far_above_the_rest(11, 4)
    chosen = _contenders._strong_enough(lists, [weights - rest for _, weights, rest in lists], 10, SAFETY)
    assert chosen is not None
    doc_ids, lower, upper, floor = _exhaustive(lists, 10)
    held = sum(np.isin(doc_ids, ids).astype(int) for ids, _, _ in lists)
    assert (held > 1).sum() > 5_000
    assert len(chosen.doc_ids) < 100
    assert np.isin(doc_ids[upper >= floor], chosen.doc_ids).all()
    assert np.array_equal(chosen.lower, lower[np.searchsorted(doc_ids, chosen.doc_ids)])


def test_the_floor_comes_from_documents_held_by_fewer_lists_when_those_held_by_the_most_prove_none():
    """Tiers over a rest of 1.0 each. Document 10, which all three hold, weighs 0.5 in each: 1.5, below the
    rests' 3.0, proves no floor. Document 20, which two hold at 2.0 each, proves 4.0: the postings whose excess
    times their document's lists reaches 1.0 are kept (document 30's 1.5 alone, not 40's 0.5), with those the
    floor came from."""
    ids = [np.array(values, dtype=np.int64) for values in ([10, 20], [10, 20], [10, 30, 40])]
    weights = [np.array(values) for values in ([0.5, 2.0], [0.5, 2.0], [0.5, 2.5, 1.5])]
    lists = [(doc_ids, list_weights, 1.0) for doc_ids, list_weights in zip(ids, weights, strict=True)]
    chosen = _contenders._strong_enough(lists, [w - 1.0 for w in weights], 1, SAFETY)
    assert chosen is not None
    assert chosen.doc_ids.tolist() == [10, 20, 30]
    assert chosen.lower.tolist() == [1.5, 4.0, 2.5]
    assert [held.tolist() for held in chosen.held] == [[True, True, False], [True, True, False], [True, False, True]]


def test_a_posting_is_strong_enough_when_its_excess_times_its_documents_lists_reaches_the_floor():
    """Tiers over a rest of 1.0 each; document 10, which all three hold at 2.0, proves a floor of 6.0, so
    `Δ = 3.0`. Document 20, which two hold at 2.5 (excess 1.5 in each, half of `Δ`), can tie with the page
    and is kept; 30, two at 2.4 (1.4 each), cannot. Of those one list alone holds, 40 (excess 3.5) is kept
    and 50 (2.9) is not: exactly the documents whose upper bound reaches the floor."""
    ids = [np.array(values, dtype=np.int64) for values in ([10, 20, 30], [10, 20, 30], [10, 40, 50])]
    weights = [np.array(values) for values in ([2.0, 2.5, 2.4], [2.0, 2.5, 2.4], [2.0, 4.5, 3.9])]
    lists = [(doc_ids, list_weights, 1.0) for doc_ids, list_weights in zip(ids, weights, strict=True)]
    chosen = _contenders._strong_enough(lists, [w - 1.0 for w in weights], 1, SAFETY)
    assert chosen is not None
    assert chosen.doc_ids.tolist() == [10, 20, 40]
    doc_ids, _, upper, floor = _exhaustive(lists, 1)
    assert doc_ids[upper >= floor].tolist() == [10, 20, 40]
