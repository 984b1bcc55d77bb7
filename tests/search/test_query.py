"""Query parsing: bounds, truncation, and that nothing in a query acts as syntax."""

from __future__ import annotations

import pytest

import temporal_recall.search._query as query_module
from temporal_recall.errors import InvalidQuery
from temporal_recall.search import MAX_QUERY_CHARS, MAX_QUERY_TERMS, MAX_TERM_LENGTH, Query, parse_query


def test_terms_are_distinct_lower_cased_and_in_first_occurrence_order() -> None:
    assert parse_query('Deploy the EU region; deploy it now, the region!') == Query(
        terms=('deploy', 'the', 'eu', 'region', 'it', 'now'), truncated=False
    )


@pytest.mark.parametrize('text', [None, 42, b'bytes query', ['a', 'list']])
def test_non_text_is_rejected(text: object) -> None:
    with pytest.raises(InvalidQuery, match='must be text'):
        parse_query(text)  # type: ignore[arg-type]


@pytest.mark.parametrize('text', ['', ' ', '\n\t  \r\n', '\u3000\u2003'])
def test_empty_or_whitespace_is_rejected(text: str) -> None:
    with pytest.raises(InvalidQuery, match='empty or only whitespace') as raised:
        parse_query(text)
    assert 'for example' in str(raised.value)


@pytest.mark.parametrize('text', ['!!!', '* "" () : -', '\x00\x01\x1b', '🎉🚀', '-- ; :'])
def test_text_without_words_is_rejected(text: str) -> None:
    with pytest.raises(InvalidQuery, match='no words') as raised:
        parse_query(text)
    assert 'for example' in str(raised.value)


def test_a_one_megabyte_query_is_rejected_before_tokenizing(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(text: str) -> None:
        raise AssertionError('tokenized a query that should have been refused')

    monkeypatch.setattr(query_module, 'query_terms', fail)
    with pytest.raises(InvalidQuery) as raised:
        parse_query('a' * 1_000_000)
    message = str(raised.value)
    assert '1,000,000' in message
    assert f'{MAX_QUERY_CHARS:,}' in message


def test_a_query_at_the_length_limit_is_accepted() -> None:
    text = 'ab ' * (MAX_QUERY_CHARS // 3) + 'c' * (MAX_QUERY_CHARS % 3)
    assert len(text) == MAX_QUERY_CHARS
    assert parse_query(text).terms == ('ab', 'c')
    with pytest.raises(InvalidQuery, match='limit'):
        parse_query(text + 'd')


def test_ten_thousand_distinct_terms_are_truncated() -> None:
    words = [f'w{index}' for index in range(10_000)]
    text = ' '.join(words)
    assert len(text) <= MAX_QUERY_CHARS

    query = parse_query(text)

    assert query.truncated is True
    assert query.terms == tuple(words[:MAX_QUERY_TERMS])


def test_exactly_the_maximum_number_of_terms_is_not_truncated() -> None:
    words = [f'w{index}' for index in range(MAX_QUERY_TERMS)]
    query = parse_query(' '.join(words * 3))
    assert query == Query(terms=tuple(words), truncated=False)
    assert parse_query(' '.join([*words, 'one_more'])).truncated is True


def test_operators_are_ordinary_words() -> None:
    query = parse_query('NOT secret OR "pass word" AND (x) NEAR/3 y* title:foo -bar ^baz {qux}')
    assert query.terms == (
        'not',
        'secret',
        'or',
        'pass',
        'word',
        'and',
        'x',
        'near',
        '3',
        'y',
        'title',
        'foo',
        'bar',
        'baz',
        'qux',
    )


def test_unicode_words_in_any_script_are_normalised_like_documents() -> None:
    query = parse_query('Café NAÏVE 東京 Ünïcödé straße Ελληνικά ＡＢＣ－１２３')
    assert query.terms == ('cafe', 'naive', '東京', 'unicode', 'strasse', 'ελληνικα', 'abc', '123')


def test_a_cjk_query_looks_up_character_pairs_and_a_lone_character_itself() -> None:
    assert parse_query('東京の天気').terms == ('東京', '京の', 'の天', '天気')
    assert parse_query('天').terms == ('天',)
    assert parse_query('주소 天').terms == ('주소', '天')


def test_a_long_cjk_query_is_cut_at_the_term_cap() -> None:
    text = ''.join(chr(0x4E00 + index) for index in range(MAX_QUERY_TERMS + 5))
    query = parse_query(text)
    assert len(query.terms) == MAX_QUERY_TERMS
    assert query.truncated
    assert all(len(term) == 2 for term in query.terms)


def test_emoji_separate_words() -> None:
    assert parse_query('rocket🚀launch 🎉party').terms == ('rocket', 'launch', 'party')


def test_nul_and_control_characters_separate_words() -> None:
    assert parse_query('foo\x00bar\x07baz\x1b[31mred\x7f').terms == ('foo', 'bar', 'baz', '31mred')


def test_long_words_are_cut_like_indexed_terms() -> None:
    assert parse_query('x' * 500).terms == ('x' * MAX_TERM_LENGTH,)


def test_case_and_spacing_do_not_change_a_query() -> None:
    assert (
        parse_query('  Delivery\tADDRESS\n delivery ')
        == parse_query('delivery address')
        == Query(terms=('delivery', 'address'))
    )
    assert parse_query('delivery address') != parse_query('address delivery'), 'terms keep their first order'
