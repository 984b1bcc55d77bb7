"""The analyzer: one pipeline for documents and queries, English unchanged, every script findable."""

from __future__ import annotations

import re
import string
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from temporal_recall.search import (
    ANALYZER,
    MAX_TERM_LENGTH,
    normalize_term,
    parse_query,
    query_terms,
    term_frequencies,
    term_spans,
    tokenize,
)

_VERSION_1_WORD = re.compile(r'\w+')


def version_1_terms(text: str) -> list[str]:
    """The rule of analyzer version 1, written out independently: word runs, lower-cased, cut."""
    return [word.lower()[:64] for word in _VERSION_1_WORD.findall(text)]


def test_the_analyzer_is_named_and_versioned() -> None:
    assert ANALYZER.version == 2
    assert ANALYZER.key == f'{ANALYZER.name}/2'


def test_term_frequencies_count_lower_cased_terms() -> None:
    assert term_frequencies('Apple apple, BANANA!') == (Counter({'apple': 2, 'banana': 1}), 3)
    assert term_frequencies('') == (Counter(), 0)


def test_normalize_term_folds_and_cuts() -> None:
    assert normalize_term('HeLLo') == 'hello'
    assert normalize_term('A' * 100) == 'a' * MAX_TERM_LENGTH
    assert normalize_term('Straße') == 'strasse'
    assert normalize_term('É' * 100) == 'e' * MAX_TERM_LENGTH


ASCII_TEXT = st.text(alphabet=st.sampled_from(string.printable + '\u2019\u201c\u201d\u2014\u00a0'))
"""ASCII words among the punctuation English text carries (curly quotes, dashes, no-break spaces)."""


@given(ASCII_TEXT)
def test_english_text_yields_exactly_the_version_1_terms(text: str) -> None:
    expected = version_1_terms(text)
    assert tokenize(text) == expected
    assert list(query_terms(text)) == expected
    assert term_frequencies(text) == (Counter(expected), len(expected))


@given(st.text())
def test_spans_agree_with_tokenize(text: str) -> None:
    spans = list(term_spans(text))
    assert [term for term, _, _ in spans] == tokenize(text)
    for term, start, end in spans:
        assert 0 <= start < end <= len(text)
        # The text a term came from analyses to (at least) that term.
        assert term in tokenize(text[start:end])


@given(st.text())
def test_every_query_term_is_a_document_term(text: str) -> None:
    """What a query looks up, the same text as a document holds: a message always finds itself."""
    assert set(query_terms(text)) <= set(tokenize(text))


@given(st.text())
def test_terms_are_already_normal(text: str) -> None:
    for term in tokenize(text):
        assert normalize_term(term) == term


@pytest.mark.parametrize(
    ('query', 'stored'),
    [
        ('天気', '東京の天気は晴れです'),
        ('订单', '我的订单号是 88231'),
        ('주소', '배송 주소는 서울시 강남구입니다'),
        ('cafe', 'We met at the café.'),
        ('andern', 'Bitte die Adresse ändern.'),
        ('ABC-123', 'ＩＤ：ＡＢＣ－１２３'),
        ('strasse', 'Hauptstraße 5 → STRASSE'),
        ('Ελληνικά', 'ΕΛΛΗΝΙΚΆ'),
        ('ガス', 'ｶﾞｽの料金'),
        ('東京', 'order_東京_42'),
        ('天', '今日は天気'),
    ],
)
def test_each_query_meets_its_text(query: str, stored: str) -> None:
    wanted = parse_query(query).terms
    assert set(wanted) <= set(tokenize(stored)), (wanted, tokenize(stored))


def test_cjk_text_gives_every_character_and_every_pair() -> None:
    assert tokenize('東京の天気') == ['東', '東京', '京', '京の', 'の', 'の天', '天', '天気', '気']
    # The length counts positions, one per character: the pairs overlap them.
    assert term_frequencies('東京の天気')[1] == 5
    assert term_frequencies('我 是')[1] == 2


def test_scripts_split_inside_a_word_run() -> None:
    assert tokenize('id東京42') == ['id', '東', '東京', '京', '42']
    assert list(query_terms('id東京42')) == ['id', '東京', '42']


def test_accents_of_european_scripts_fold_and_kana_voicing_stays() -> None:
    assert tokenize('Crème brûlée, naïve, ÅNGSTRÖM') == ['creme', 'brulee', 'naive', 'angstrom']
    assert tokenize('cafe\u0301') == ['cafe']  # written decomposed: the same term
    assert 'が' not in tokenize('か')
    assert tokenize('か\u3099') == tokenize('が') == ['が']


def test_hangul_written_as_jamo_composes_into_syllables() -> None:
    decomposed = '\u1100\u1161\u11a8\u1100\u1161'  # 각가 as conjoining jamo
    assert tokenize(decomposed) == tokenize('각가') == ['각', '각가', '가']


def test_spans_place_each_cjk_term_on_its_own_characters() -> None:
    text = 'Note: 東京の天気は晴れ'
    spans = {term: text[start:end] for term, start, end in term_spans(text)}
    assert spans['天気'] == '天気'
    assert spans['晴'] == '晴'
    assert spans['note'] == 'Note'


def test_spans_of_full_width_text_are_the_original_characters() -> None:
    text = 'ＩＤ：ＡＢＣ－１２３'
    assert [(term, text[start:end]) for term, start, end in term_spans(text)] == [
        ('id', 'ＩＤ'),
        ('abc', 'ＡＢＣ'),
        ('123', '１２３'),
    ]


def test_symbols_never_become_terms() -> None:
    assert tokenize('™ ® → ★') == []
