"""`include_branches` on the HTTP search: a conversation is searched as it stands unless the body asks for more."""

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


async def test_include_branches_also_searches_the_answer_a_retry_replaced(tmp_path: Path) -> None:
    path = tmp_path / 'recall.db'
    await _retried(path)
    with serving(create_app(path, tokens=TOKENS)) as api:
        for body, expected in (
            ({'conversation_id': 'ferry', 'query': 'Mallaig'}, []),
            ({'conversation_id': 'ferry', 'query': 'Mallaig', 'include_branches': False}, []),
            ({'conversation_id': 'ferry', 'query': 'Mallaig', 'include_branches': True}, [1]),
            ({'query': 'Mallaig'}, []),
            ({'query': 'Mallaig', 'include_branches': True}, [1]),
            ({'conversation_id': 'ferry', 'query': 'Armadale'}, [1]),
        ):
            response = api.post(SEARCH, token=ACME, json_body=body)
            assert response.status == 200, response.body
            assert [hit['position'] for hit in response.json()['hits']] == expected, body
        # Validated at the edge, as every field: a string is not a boolean.
        refused = api.post(SEARCH, token=ACME, json_body={'query': 'Mallaig', 'include_branches': 'yes'})
        assert refused.status == 400
        assert 'include_branches' in refused.json()['error']['message']
