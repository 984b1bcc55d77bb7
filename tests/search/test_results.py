"""Result models and search options: validation, immutability and surviving a payload round trip."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from temporal_recall.errors import InvalidSearchParameters
from temporal_recall.search import (
    MAX_CONTEXT_LINES,
    MAX_LIMIT,
    MAX_QUERY_ECHO_CHARS,
    BM25Parameters,
    ContextMessage,
    SearchHit,
    SearchOptions,
    SearchResult,
)


def test_search_options_defaults() -> None:
    options = SearchOptions()
    assert (options.limit, options.context_lines, options.parameters) == (10, 0, BM25Parameters())


def test_search_options_accept_the_boundaries() -> None:
    options = SearchOptions(limit=MAX_LIMIT, context_lines=MAX_CONTEXT_LINES, parameters=BM25Parameters(k1=0, b=1))
    assert options.limit == MAX_LIMIT
    assert SearchOptions(limit=1).limit == 1


@pytest.mark.parametrize('limit', [0, -5, MAX_LIMIT + 1, True, 2.0, '10'])
def test_search_options_reject_bad_limits(limit: object) -> None:
    with pytest.raises(InvalidSearchParameters) as raised:
        SearchOptions(limit=limit)  # type: ignore[arg-type]
    message = str(raised.value)
    assert f'limit={limit!r}' in message
    assert f'between 1 and {MAX_LIMIT}' in message


@pytest.mark.parametrize('context_lines', [-1, MAX_CONTEXT_LINES + 1, False, 1.0])
def test_search_options_reject_bad_context_lines(context_lines: object) -> None:
    with pytest.raises(InvalidSearchParameters) as raised:
        SearchOptions(context_lines=context_lines)  # type: ignore[arg-type]
    message = str(raised.value)
    assert f'context_lines={context_lines!r}' in message
    assert f'up to {MAX_CONTEXT_LINES}' in message


def test_result_defaults() -> None:
    result = SearchResult(query='invoice')
    assert result.hits == []
    assert result.searched_documents == 0
    assert result.truncated_query is False
    assert result.message is None


def test_result_clips_the_query() -> None:
    result = SearchResult(query='q' * 5_000)
    assert len(result.query) == MAX_QUERY_ECHO_CHARS
    assert result.query.endswith('…')
    assert SearchResult(query='q' * MAX_QUERY_ECHO_CHARS).query == 'q' * MAX_QUERY_ECHO_CHARS


def test_a_result_recorded_by_an_older_worker_still_validates() -> None:
    """A search result is an activity result in recorded histories: fields added later need defaults."""
    recorded = (
        '{"query": "invoice", "hits": [{"score": 1.5, "conversation_id": "c-1", "entry_id": "e-1", '
        '"position": 0, "role": "user", "context": [{"position": 1, "role": "assistant"}]}]}'
    )
    result = SearchResult.model_validate_json(recorded)
    [hit] = result.hits
    assert (hit.run_id, hit.timestamp, hit.excerpt) == (None, None, '')
    assert hit.context == [ContextMessage(position=1, role='assistant', excerpt='')]
    assert (result.searched_documents, result.truncated_query, result.message) == (0, False, None)
    with pytest.raises(ValidationError):  # what every result must say is still required
        SearchResult.model_validate_json('{"hits": []}')


def test_result_round_trips_through_json() -> None:
    hit = SearchHit(
        score=3.25,
        conversation_id='conv-1',
        run_id='run-1',
        entry_id='entry-9',
        position=9,
        role='user',
        timestamp=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        excerpt='invoice 4521',
        context=[ContextMessage(position=10, role='assistant', excerpt='paid')],
    )
    result = SearchResult(query='invoice', hits=[hit], searched_documents=12, truncated_query=True)
    assert SearchResult.model_validate_json(result.model_dump_json()) == result


def test_hit_defaults_allow_older_payloads() -> None:
    hit = SearchHit.model_validate(
        {'score': 1.0, 'conversation_id': 'c', 'entry_id': 'e', 'position': 0, 'role': 'assistant'}
    )
    assert (hit.run_id, hit.timestamp, hit.excerpt, hit.context) == (None, None, '', [])
