"""`GET /api/v1/conversations` a page at a time: `next_cursor` in the answer, `after` to page on, and
a cursor the listing did not hand out (malformed, altered, another scope's) refused with 400."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from ._http import Client, Response
from .conftest import ACME, GLOBEX

LIST = '/api/v1/conversations'


def page(api: Client, token: str, *, limit: int, after: str | None = None) -> Response:
    query = f'?limit={limit}' + ('' if after is None else f'&after={quote(after)}')
    return api.get(LIST + query, token=token)


def test_the_list_pages_with_a_cursor(api: Client) -> None:
    first = page(api, ACME, limit=1)
    assert first.status == 200, first.body
    assert set(first.json()) == {'conversations', 'next_cursor'}
    assert [c['conversation_id'] for c in first.json()['conversations']] == ['support-42']
    cursor = first.json()['next_cursor']
    assert isinstance(cursor, str) and cursor

    second = page(api, ACME, limit=1, after=cursor)
    assert second.status == 200, second.body
    assert second.json() == {'conversations': second.json()['conversations'], 'next_cursor': None}
    assert [c['conversation_id'] for c in second.json()['conversations']] == ['acme-billing']

    whole = api.get(LIST, token=ACME).json()
    assert whole['next_cursor'] is None and len(whole['conversations']) == 2


@pytest.mark.parametrize('after', ['nonsense!', 'bm9uc2Vuc2U', 'A' * 5000, ''])
def test_a_malformed_cursor_is_refused(api: Client, after: str) -> None:
    response = page(api, ACME, limit=1, after=after)
    assert response.status == 400, response.body
    error = response.json()['error']
    assert error['code'] == 'invalid_parameters'
    assert 'is not a cursor' in error['message'] or 'longer than any cursor' in error['message']
    assert len(error['message']) < 400


def test_a_cursor_of_another_scope_is_refused(api: Client) -> None:
    cursor = page(api, ACME, limit=1).json()['next_cursor']
    response = page(api, GLOBEX, limit=1, after=cursor)
    assert response.status == 400, response.body
    assert response.json()['error']['code'] == 'invalid_parameters'
    assert 'another scope' in response.json()['error']['message']


def test_the_cursor_is_documented(api: Client) -> None:
    document = api.get('/openapi.json').json()
    parameters = {p['name']: p for p in document['paths'][LIST]['get']['parameters']}
    assert set(parameters) == {'limit', 'after'}
    assert 'next_cursor' in document['components']['schemas']['ConversationList']['properties']
