"""BM25 ranking, checked against a from-the-definition reference on random corpora."""

from __future__ import annotations

import math
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from temporal_recall.errors import InvalidSearchParameters
from temporal_recall.models import SearchRequest
from temporal_recall.search import (
    DEFAULT_PARAMETERS,
    BM25Parameters,
    ScoredDocument,
    idf,
    rank,
    term_frequencies,
    tokenize,
)
from temporal_recall.store.protocol import IndexStats, Posting

VOCABULARY = ('apple', 'banana', 'cherry', 'date', 'elder')


def build_index(corpus: list[str]) -> tuple[IndexStats, dict[str, list[Posting]]]:
    """What a store would hold for `corpus`: one document per text, `doc_id` = index in the corpus."""
    postings: dict[str, list[Posting]] = defaultdict(list)
    total_length = 0
    for doc_id, text in enumerate(corpus):
        frequencies, length = term_frequencies(text)
        total_length += length
        for term, frequency in frequencies.items():
            postings[term].append(Posting(doc_id=doc_id, term_frequency=frequency, length=length))
    return IndexStats(document_count=len(corpus), total_length=total_length), dict(postings)


def reference_rank(corpus: list[str], query: list[str], k1: float, b: float, limit: int) -> list[tuple[int, float]]:
    """BM25 straight from its definition: every document, every distinct query term, no index."""
    documents = [tokenize(text) for text in corpus]
    n = len(documents)
    if n == 0:
        return []
    avgdl = sum(len(words) for words in documents) / n
    distinct_terms = list(dict.fromkeys(query))
    scored: list[tuple[int, float]] = []
    for doc_index, words in enumerate(documents):
        dl = len(words)
        score = 0.0
        matched = False
        for term in distinct_terms:
            tf = words.count(term)
            if tf == 0:
                continue
            df = sum(1 for other in documents if term in other)
            term_idf = math.log((n - df + 0.5) / (df + 0.5) + 1)
            score += term_idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))
            matched = True
        if matched:
            scored.append((doc_index, score))
    scored.sort(key=lambda item: (-item[1], item[0]))
    return scored[:limit]


_words = st.sampled_from(VOCABULARY).flatmap(lambda word: st.sampled_from((word, word.upper(), word.title())))
_documents = st.lists(_words, max_size=8).flatmap(
    lambda words: st.sampled_from((' ', ', ', '\n', ' - ')).map(lambda separator: separator.join(words))
)


@st.composite
def corpora(draw: st.DrawFn) -> list[str]:
    """Random corpora in which identical documents (and so exact ties) are common."""
    distinct = draw(st.lists(_documents, min_size=1, max_size=6))
    picks = draw(st.lists(st.integers(0, len(distinct) - 1), max_size=30))
    return [distinct[pick] for pick in picks]


_queries = st.lists(st.sampled_from((*VOCABULARY, 'fig')), min_size=1, max_size=6)
_k1 = st.floats(min_value=0, max_value=3, allow_nan=False)
_b = st.floats(min_value=0, max_value=1, allow_nan=False)


@settings(max_examples=300)
@given(corpus=corpora(), query=_queries, k1=_k1, b=_b, limit=st.integers(1, 40))
def test_rank_matches_reference(corpus: list[str], query: list[str], k1: float, b: float, limit: int) -> None:
    stats, postings = build_index(corpus)
    expected = reference_rank(corpus, query, k1, b, limit)

    actual = rank(stats, postings, query, parameters=BM25Parameters(k1=k1, b=b), limit=limit)

    assert [document.doc_id for document in actual] == [doc_id for doc_id, _ in expected]
    for document, (_, score) in zip(actual, expected, strict=True):
        assert math.isclose(document.score, score, rel_tol=1e-12)


def test_idf_from_definition() -> None:
    assert idf(10, 0) == pytest.approx(math.log(22))
    assert idf(10, 10) == pytest.approx(math.log(0.5 / 10.5 + 1))
    assert idf(0, 0) == pytest.approx(math.log(2))


def test_idf_stays_positive_for_a_term_in_every_document() -> None:
    assert idf(1000, 1000) > 0


def test_idf_falls_as_a_term_gets_commoner() -> None:
    values = [idf(100, df) for df in range(101)]
    assert values == sorted(values, reverse=True)


def test_idf_rejects_negative_counts() -> None:
    with pytest.raises(ValueError, match='non-negative'):
        idf(-1, 0)
    with pytest.raises(ValueError, match='non-negative'):
        idf(3, -1)


def test_parameters_defaults() -> None:
    assert BM25Parameters() == BM25Parameters(k1=1.5, b=0.75)


@pytest.mark.parametrize(('k1', 'b'), [(0, 0), (0.0, 1.0), (1e9, 0.5), (2, 1)])
def test_parameters_accept_the_boundaries(k1: float, b: float) -> None:
    parameters = BM25Parameters(k1=k1, b=b)
    assert (parameters.k1, parameters.b) == (k1, b)


@pytest.mark.parametrize('k1', [-0.01, -1, math.nan, math.inf, -math.inf, True, '1.2', None])
def test_parameters_reject_bad_k1(k1: object) -> None:
    with pytest.raises(InvalidSearchParameters) as raised:
        BM25Parameters(k1=k1)  # type: ignore[arg-type]
    message = str(raised.value)
    assert 'k1' in message
    assert repr(k1) in message
    assert '>= 0' in message


@pytest.mark.parametrize('b', [-0.01, 1.01, 2, math.nan, math.inf, False, '0.5', None])
def test_parameters_reject_bad_b(b: object) -> None:
    with pytest.raises(InvalidSearchParameters) as raised:
        BM25Parameters(b=b)  # type: ignore[arg-type]
    message = str(raised.value)
    assert 'b=' in message
    assert repr(b) in message
    assert 'from 0 to 1' in message


def test_search_requests_default_to_the_rankers_parameters() -> None:
    """`SearchRequest` carries k1 and b across Temporal as plain fields: its defaults must be the ranker's."""
    request = SearchRequest(query='apple', conversation_id='conversation-1')
    assert BM25Parameters(k1=request.k1, b=request.b) == DEFAULT_PARAMETERS
    assert BM25Parameters() == DEFAULT_PARAMETERS


def test_empty_index_has_no_results() -> None:
    stats = IndexStats(document_count=0, total_length=0)
    assert rank(stats, {}, ['apple'], limit=10) == []


def test_terms_without_postings_contribute_nothing() -> None:
    stats, postings = build_index(['apple banana', 'cherry'])
    with_unknown = rank(stats, postings, ['apple', 'fig', 'grape'], limit=10)
    assert with_unknown == rank(stats, postings, ['apple'], limit=10)
    assert rank(stats, postings, ['fig'], limit=10) == []
    assert rank(stats, {**postings, 'fig': []}, ['fig'], limit=10) == []


def test_a_repeated_query_term_counts_once() -> None:
    stats, postings = build_index(['apple banana', 'banana cherry', 'apple apple date'])
    assert rank(stats, postings, ['apple', 'apple', 'apple'], limit=10) == rank(stats, postings, ['apple'], limit=10)


def test_ties_are_broken_by_smaller_doc_id() -> None:
    stats, postings = build_index(['cherry', 'apple banana', 'cherry', 'apple banana', 'apple banana'])
    ranked = rank(stats, postings, ['apple'], limit=10)
    assert [document.doc_id for document in ranked] == [1, 3, 4]
    assert len({document.score for document in ranked}) == 1


def test_limit_keeps_the_best() -> None:
    corpus = [' '.join(['apple'] * count + ['banana'] * 5) for count in range(1, 51)]
    stats, postings = build_index(corpus)
    ranked = rank(stats, postings, ['apple'], limit=3)
    everything = rank(stats, postings, ['apple'], limit=50)
    assert ranked == everything[:3]
    assert [document.doc_id for document in ranked] == [49, 48, 47]


@pytest.mark.parametrize('limit', [0, -1, True, 2.5])
def test_limit_must_be_a_positive_integer(limit: object) -> None:
    stats, postings = build_index(['apple'])
    with pytest.raises(InvalidSearchParameters, match='limit'):
        rank(stats, postings, ['apple'], limit=limit)  # type: ignore[arg-type]


def test_more_matching_terms_rank_higher() -> None:
    stats, postings = build_index(['apple', 'apple banana', 'cherry'])
    ranked = rank(stats, postings, ['apple', 'banana'], limit=10)
    assert [document.doc_id for document in ranked] == [1, 0]


def test_shorter_documents_win_with_length_normalisation() -> None:
    stats, postings = build_index(['apple banana cherry date', 'apple', 'elder'])
    ranked = rank(stats, postings, ['apple'], limit=10)
    assert [document.doc_id for document in ranked] == [1, 0]
    unnormalised = rank(stats, postings, ['apple'], parameters=BM25Parameters(b=0), limit=10)
    assert unnormalised[0].score == unnormalised[1].score


def test_k1_zero_scores_presence_only() -> None:
    stats, postings = build_index(['apple apple apple banana', 'apple banana', 'cherry'])
    ranked = rank(stats, postings, ['apple'], parameters=BM25Parameters(k1=0), limit=10)
    assert [document.score for document in ranked] == [idf(3, 2), idf(3, 2)]


def test_zero_average_length_does_not_divide_by_zero() -> None:
    # Inconsistent on purpose: a write may land between reading the stats and the postings.
    stats = IndexStats(document_count=2, total_length=0)
    postings = {'apple': [Posting(doc_id=0, term_frequency=1, length=1)]}
    [document] = rank(stats, postings, ['apple'], limit=5)
    # A length ratio of 0 leaves the denominator at tf + k1 * (1 - b).
    expected = idf(2, 1) * 1 * 2.5 / (1 + 1.5 * 0.25)
    assert document.doc_id == 0
    assert document.score == pytest.approx(expected)


def test_document_frequency_above_document_count_keeps_scores_positive() -> None:
    stats = IndexStats(document_count=1, total_length=2)
    postings = {
        'apple': [
            Posting(doc_id=0, term_frequency=1, length=2),
            Posting(doc_id=1, term_frequency=1, length=2),
            Posting(doc_id=2, term_frequency=1, length=2),
        ]
    }
    ranked = rank(stats, postings, ['apple'], limit=5)
    assert [document.doc_id for document in ranked] == [0, 1, 2]
    assert all(document.score > 0 for document in ranked)


def test_postings_with_zero_frequency_are_ignored() -> None:
    stats = IndexStats(document_count=2, total_length=4)
    postings = {'apple': [Posting(doc_id=0, term_frequency=0, length=2), Posting(doc_id=1, term_frequency=1, length=2)]}
    assert [document.doc_id for document in rank(stats, postings, ['apple'], limit=5)] == [1]


def test_the_order_postings_arrive_in_does_not_change_the_ranking() -> None:
    """Backends read postings in whatever order their indexes give; the ranking must not depend on it."""
    stats = IndexStats(document_count=4, total_length=14)
    postings = {
        'apple': [Posting(0, 1, 3), Posting(1, 2, 4), Posting(2, 1, 3), Posting(3, 1, 4)],
        'pie': [Posting(2, 1, 3), Posting(0, 1, 3)],
    }
    ranked = rank(stats, postings, ['apple', 'pie'], limit=4)
    shuffled = {term: list(reversed(found)) for term, found in reversed(postings.items())}
    assert rank(stats, shuffled, ['apple', 'pie'], limit=4) == ranked
    assert [document.doc_id for document in ranked] == [0, 2, 1, 3]  # equal scores: the smaller doc_id first
    assert ranked[0] == ScoredDocument(0, ranked[0].score)
