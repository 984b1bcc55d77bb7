"""Ids and queries that are not usable text answer a 4xx JSON error on both backends, never a 500.

PostgreSQL cannot store a NUL byte and neither driver can encode a lone surrogate, so before ids
were checked up front the same request answered 404 on SQLite and a plain-text 500 with a driver
traceback on PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from temporal_recall._validation import MAX_ID_LENGTH
from temporal_recall.api import create_app

from ..store._support import PostgresSite
from ..store._support import postgres_url as configured_postgres_url
from ._http import Client, Response, serving
from .conftest import ACME, TOKENS, fill_store

SEARCH = '/api/v1/conversations/search'
CONVERSATIONS = '/api/v1/conversations'


@pytest.fixture(scope='module', params=['sqlite', pytest.param('postgres', marks=pytest.mark.postgres)])
async def store_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    """A store of each backend holding the API test conversations."""
    if request.param == 'sqlite':
        url = str(tmp_path_factory.mktemp('api-bad-input') / 'recall.db')
        await fill_store(Path(url))
        yield url
        return
    site = PostgresSite(configured_postgres_url())
    try:
        await fill_store(site.url)  # type: ignore[arg-type]  # open_store takes a URL as well as a path
        yield site.url
    finally:
        await site.close()


@pytest.fixture(scope='module')
def api(store_url: str) -> Iterator[Client]:
    with serving(create_app(store_url, tokens=TOKENS)) as client:
        yield client


def error_of(response: Response, status: int, code: str | set[str]) -> str:
    """The error message, once the answer is the JSON error expected (never plain text, never a 500)."""
    assert response.headers['content-type'].startswith('application/json'), response.body[:200]
    assert response.status == status, response.body[:300]
    assert response.json()['error']['code'] in ({code} if isinstance(code, str) else code), response.body[:300]
    message = response.json()['error']['message']
    assert isinstance(message, str)
    assert len(message) < 300  # never echoes unbounded input
    assert 'Traceback' not in message and 'asyncpg' not in message
    return message


@pytest.mark.parametrize(
    ('raw', 'problem'),
    [
        ('a%00b', 'control character U+0000'),
        ('%00', 'control character U+0000'),
        ('a%0Ab', 'control character U+000A'),
        ('a%1Bb', 'control character U+001B'),
        ('a%7F', 'control character U+007F'),
        ('a%C2%85', 'control character U+0085'),
        ('x' * (MAX_ID_LENGTH + 1), f'longer than {MAX_ID_LENGTH}'),
        ('y' * 10_000, f'longer than {MAX_ID_LENGTH}'),
    ],
)
def test_a_path_id_that_is_not_an_id_answers_400(api: Client, raw: str, problem: str) -> None:
    message = error_of(api.get(f'{CONVERSATIONS}/{raw}', token=ACME), 400, 'invalid_id')
    assert problem in message
    assert 'y' * 100 not in message


def test_a_path_id_that_is_not_utf8_is_not_a_500(api: Client) -> None:
    # The server decodes the path leniently (an undecodable byte becomes U+FFFD), so it names no conversation.
    assert 'No conversation' in error_of(api.get(f'{CONVERSATIONS}/a%FFb', token=ACME), 404, 'not_found')


def test_the_404_for_a_long_id_quotes_only_its_start(api: Client) -> None:
    long_id = 'z' * MAX_ID_LENGTH  # allowed, and absent
    message = error_of(api.get(f'{CONVERSATIONS}/{long_id}', token=ACME), 404, 'not_found')
    assert f'{MAX_ID_LENGTH} characters' in message and 'z' * 41 not in message


@pytest.mark.parametrize(
    ('fields', 'code', 'problem'),
    [
        ({'conversation_id': 'a\u0000b'}, 'invalid_id', '`conversation_id`'),
        ({'run_id': '\u0000'}, 'invalid_id', '`run_id`'),
        ({'run_id': 'run\u0007'}, 'invalid_id', 'control character U+0007'),
        # pydantic's JSON parser refuses some lone surrogates itself (400 `bad_request`, naming the field);
        # the others reach the id rule.
        ({'conversation_id': '\ud800'}, {'bad_request', 'invalid_id'}, 'conversation_id'),
        ({'run_id': 'ok\udcff'}, {'bad_request', 'invalid_id'}, 'run_id'),
        ({'conversation_id': 'x' * (MAX_ID_LENGTH + 1)}, 'invalid_id', f'longer than {MAX_ID_LENGTH}'),
        ({'run_id': 'r' * 10_000}, 'invalid_id', f'longer than {MAX_ID_LENGTH}'),
        ({'query': 'order\u0000'}, 'invalid_query', 'control character U+0000'),
        ({'query': '\ud83d order'}, {'bad_request', 'invalid_query'}, 'U+D83D'),
    ],
)
def test_a_search_body_with_bad_ids_or_query_answers_400(
    api: Client, fields: dict[str, Any], code: str | set[str], problem: str
) -> None:
    body = {'conversation_id': 'support-42', 'query': 'order', **fields}
    # json.dumps writes lone surrogates as \ud800 escapes, which JSON allows and Python decodes as is.
    response = api.post(
        SEARCH, token=ACME, body=json.dumps(body).encode(), headers={'Content-Type': 'application/json'}
    )
    assert problem in error_of(response, 400, code)


def test_invalid_utf8_in_a_search_body_answers_400(api: Client) -> None:
    body = b'{"conversation_id": "support-\xff42", "query": "order"}'
    error_of(api.post(SEARCH, token=ACME, body=body, headers={'Content-Type': 'application/json'}), 400, 'bad_request')


def test_the_store_still_answers_after_bad_input(api: Client) -> None:
    assert api.get(f'{CONVERSATIONS}/a%00b', token=ACME).status == 400
    assert api.get(f'{CONVERSATIONS}/support-42', token=ACME).status == 200
    response = api.post(SEARCH, token=ACME, json_body={'conversation_id': 'support-42', 'query': 'Harbour Street'})
    assert response.status == 200 and response.json()['hits']
