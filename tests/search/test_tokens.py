"""The tokenizer's offsets agree with its terms, which excerpts rely on."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from temporal_recall.search import MAX_TERM_LENGTH, normalize_term, term_frequencies, term_spans, tokenize


def test_term_frequencies_count_lower_cased_terms() -> None:
    assert term_frequencies('Apple apple, BANANA!') == (Counter({'apple': 2, 'banana': 1}), 3)
    assert term_frequencies('') == (Counter(), 0)


def test_normalize_term_lower_cases_and_cuts() -> None:
    assert normalize_term('HeLLo') == 'hello'
    assert normalize_term('A' * 100) == 'a' * MAX_TERM_LENGTH


@given(st.text())
def test_spans_agree_with_tokenize(text: str) -> None:
    spans = list(term_spans(text))
    assert [term for term, _, _ in spans] == tokenize(text)
    for term, start, end in spans:
        assert normalize_term(text[start:end]) == term
