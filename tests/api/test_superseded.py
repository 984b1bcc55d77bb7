"""`include_superseded` on the HTTP search: what a retry replaced is searched only when the body asks for it
(`include_branches`, its old name, still works and says it is deprecated)."""

from __future__ import annotations

from pathlib import Path

from temporal_recall.api import create_app
from temporal_recall.store import open_store

from ..store._support import answered_twice
from ._http import serving
from .conftest import ACME, TOKENS

SEARCH = '/api/v1/conversations/search'


async def _retried(path: Path) -> None:
    store = await open_store(path)
    try:
        await answered_twice(
            store,
            'ferry',
            'acme',
            'when does the ferry to Skye leave?',
            'the ferry leaves at nine from Mallaig',
            'the ferry leaves at noon from Armadale',
        )
    finally:
        await store.close()


async def test_include_superseded_also_searches_the_answer_a_retry_replaced(tmp_path: Path) -> None:
    path = tmp_path / 'recall.db'
    await _retried(path)
    with serving(create_app(path, tokens=TOKENS)) as api:
        for body, expected in (
            ({'conversation_id': 'ferry', 'query': 'Mallaig'}, []),
            ({'conversation_id': 'ferry', 'query': 'Mallaig', 'include_superseded': False}, []),
            ({'conversation_id': 'ferry', 'query': 'Mallaig', 'include_superseded': True}, [1]),
            ({'query': 'Mallaig'}, []),
            ({'query': 'Mallaig', 'include_superseded': True}, [1]),
            ({'conversation_id': 'ferry', 'query': 'Armadale'}, [1]),
        ):
            response = api.post(SEARCH, token=ACME, json_body=body)
            assert response.status == 200, response.body
            assert 'deprecation' not in response.headers
            assert [hit['position'] for hit in response.json()['hits']] == expected, body
        # Validated at the edge, as every field: a string is not a boolean.
        refused = api.post(SEARCH, token=ACME, json_body={'query': 'Mallaig', 'include_superseded': 'yes'})
        assert refused.status == 400
        assert 'include_superseded' in refused.json()['error']['message']


async def test_the_old_name_include_branches_still_works_and_says_it_is_deprecated(tmp_path: Path) -> None:
    path = tmp_path / 'recall.db'
    await _retried(path)
    with serving(create_app(path, tokens=TOKENS)) as api:
        for flag, expected in ((True, [1]), (False, [])):
            body = {'conversation_id': 'ferry', 'query': 'Mallaig', 'include_branches': flag}
            response = api.post(SEARCH, token=ACME, json_body=body)
            assert response.status == 200, response.body
            assert response.headers['deprecation'] == 'true'
            assert 'include_superseded' in response.headers['warning']
            assert [hit['position'] for hit in response.json()['hits']] == expected
        refused = api.post(SEARCH, token=ACME, json_body={'query': 'Mallaig', 'include_branches': 'yes'})
        assert refused.status == 400
        assert 'include_branches' in refused.json()['error']['message']
