"""Excerpts: bounded, centred on a whole-word match, and found however deep the match is."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from temporal_recall.search import excerpt, tokenize


def test_short_text_is_returned_with_whitespace_collapsed() -> None:
    assert excerpt('  hello\n\n  big\tworld \r\n', ['world']) == 'hello big world'


def test_empty_text() -> None:
    assert excerpt('', ['anything']) == ''


def test_without_a_match_the_beginning_is_shown() -> None:
    text = ' '.join(f'word{index}' for index in range(200))
    result = excerpt(text, ['absent'], width=50)
    assert result.startswith('word0 word1 ')
    assert result.endswith('…')
    assert len(result) <= 50


def test_without_terms_the_beginning_is_shown() -> None:
    result = excerpt('a' * 10 + ' ' + 'b' * 500, [], width=40)
    assert result.startswith('aaaaaaaaaa ')
    assert len(result) == 40


def test_a_match_fifty_thousand_characters_in_is_shown() -> None:
    text = 'filler ' * 7_200 + 'The NEEDLE is here. ' + 'tail ' * 10_000
    assert text.index('NEEDLE') >= 50_000
    result = excerpt(text, ['needle'], width=240)
    assert 'NEEDLE is here.' in result
    assert result.startswith('…')
    assert result.endswith('…')
    assert len(result) <= 240


def test_the_match_has_some_lead_in() -> None:
    text = 'x ' * 1000 + 'target ' + 'y ' * 1000
    result = excerpt(text, ['target'], width=90)
    assert result.index('target') >= 20


def test_only_whole_words_match() -> None:
    text = 'concatenate ' * 100 + 'the Cat. sat ' + 'z ' * 500
    result = excerpt(text, ['cat'], width=60)
    assert 'Cat. sat' in result


def test_query_terms_are_matched_case_insensitively() -> None:
    result = excerpt('a ' * 500 + 'HeLLo there ' + 'b ' * 500, ['HELLO'], width=40)
    assert 'HeLLo there' in result


def test_the_first_occurrence_of_any_term_is_used() -> None:
    text = 'a ' * 300 + 'second ' + 'b ' * 300 + 'first ' + 'c ' * 300
    result = excerpt(text, ['first', 'second'], width=40)
    assert 'second' in result
    assert 'first' not in result


def test_a_match_near_the_end_fills_the_window() -> None:
    text = 'head ' * 500 + 'finale'
    result = excerpt(text, ['finale'], width=60)
    assert result.startswith('…')
    assert result.endswith('finale')
    assert len(result) <= 60
    assert len(result) >= 55


def test_a_match_longer_than_the_window_shows_its_start() -> None:
    blob = 'Q' * 5_000
    result = excerpt('intro ' * 100 + blob + ' outro', ['q' * 64], width=50)
    assert 'Q' * 40 in result
    assert len(result) <= 50


def test_offsets_survive_characters_whose_lower_case_is_longer() -> None:
    # 'İ'.lower() is two code points; offsets must come from the original text, not the lowered one.
    text = 'İ' * 3_000 + ' target ' + 'x ' * 100
    assert 'target' in excerpt(text, ['target'], width=40)
    assert 'İSTANBUL' in excerpt('y ' * 300 + 'İSTANBUL ' + 'y ' * 300, ['İstanbul'], width=40)


def test_nul_and_control_characters_do_not_break_matching() -> None:
    text = '\x00' * 1_000 + 'needle\x07' + '\x01' * 1_000
    result = excerpt(text, ['needle'], width=30)
    assert 'needle' in result
    assert len(result) <= 30


def test_a_narrow_width_is_refused() -> None:
    with pytest.raises(ValueError, match='too narrow'):
        excerpt('some text', ['text'], width=3)


def test_a_very_long_text_with_no_match() -> None:
    result = excerpt('ab cd ' * 500_000, ['zz'], width=240)
    assert len(result) == 240
    assert result.endswith('…')


_vocabulary = st.sampled_from(('alpha', 'beta', 'gamma', 'delta', 'Alpha', 'BETA'))
_separators = st.sampled_from((' ', '  ', '\n', ', ', '\t', '. ', '-'))


@given(
    words=st.lists(st.tuples(_vocabulary, _separators), max_size=120),
    term=st.sampled_from(('alpha', 'beta', 'gamma', 'delta', 'omega')),
    width=st.integers(8, 120),
)
def test_excerpt_is_bounded_and_shows_the_first_match(words: list[tuple[str, str]], term: str, width: int) -> None:
    text = ''.join(word + separator for word, separator in words)
    result = excerpt(text, [term], width=width)
    assert len(result) <= width
    if term in tokenize(text):
        assert term in tokenize(result)


@pytest.mark.parametrize(
    ('filler', 'sentence', 'query', 'shown'),
    [
        ('あ', '東京の天気は晴れです', '天気', '天気'),
        ('我', '我的订单号是 88231', '订单', '订单'),
        ('가', ' 배송 주소는 서울시 ', '주소', '주소는'),
        ('x ', ' Bitte die Adresse ändern. ', 'andern', 'ändern'),
        ('x ', ' ＩＤ：ＡＢＣ－１２３ ', 'ABC-123', 'ＡＢＣ－１２３'),
        ('x ', ' the café opens ', 'cafe', 'café'),
    ],
)
def test_a_match_is_shown_in_every_script(filler: str, sentence: str, query: str, shown: str) -> None:
    from temporal_recall.search import parse_query

    text = filler * 400 + sentence + filler * 400
    result = excerpt(text, parse_query(query).terms, width=40)
    assert shown in result
    assert result.startswith('…')
    assert result.endswith('…')
    assert len(result) <= 40


_ASCII_WORDS = st.text(alphabet='abcXYZ019_', min_size=1, max_size=5)
_OTHER_TERMS = st.sampled_from(['a-b', 'é', '東京', '', 'x' * 64, 'X' * 70])


@given(
    words=st.lists(_ASCII_WORDS, min_size=1, max_size=40),
    separators=st.lists(st.sampled_from([' ', '-', '.', ', ', '\n', '/', "'", '(']), min_size=40, max_size=40),
    data=st.data(),
    long_word=st.booleans(),
)
def test_ascii_text_is_matched_as_the_analyzer_reads_it(
    words: list[str], separators: list[str], data: st.DataObject, long_word: bool
) -> None:
    """The ASCII fast path finds the match the analyzer's own scan finds: whole runs only, case folded,
    terms cut to their longest (a 64-character term matches a longer run), no match for a term no run makes.
    Terms are drawn from the text's own words and pieces of them, so a match inside a longer run is tried."""
    from temporal_recall.search import _excerpt
    from temporal_recall.text._analyzer import normalize_term, term_spans

    if long_word:
        words = [*words, 'x' * 64 + 'tail']
    pieces = st.sampled_from(words).flatmap(
        lambda word: st.tuples(st.integers(0, len(word)), st.integers(0, len(word))).map(lambda at: word[at[0] : at[1]])
    )
    terms = data.draw(st.lists(st.one_of(st.sampled_from(words), pieces, _ASCII_WORDS, _OTHER_TERMS), max_size=4))
    text = ''.join(word + separator for word, separator in zip(words, separators, strict=False))
    wanted = {normalize_term(term) for term in terms}
    scanned = next(((start, end) for term, start, end in term_spans(text) if term in wanted), None)
    assert text.isascii()
    assert _excerpt._first_match(text, terms) == (scanned if wanted else None)  # pyright: ignore[reportPrivateUsage]
