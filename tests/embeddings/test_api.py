"""The HTTP API's `mode`: meaning without an embedder uses the store's model (refused where the store has no vectors),
a model that does not match the store answers 503."""

from __future__ import annotations

from pathlib import Path

from pydantic_ai.embeddings import Embedder

from temporal_recall.api import create_app
from temporal_recall.embeddings import LOCAL_MODEL
from temporal_recall.store import open_store

from ..api._http import serving
from .test_hybrid import FACTS, _Other, tell

TOKEN = 'acme-token-0123456789abcdef'
SEARCH = '/api/v1/conversations/search'


async def test_the_api_searches_by_meaning_only_with_the_stores_model(tmp_path: Path) -> None:
    path, bare = tmp_path / 'recall.db', tmp_path / 'bare.db'
    for where, embedder in ((path, LOCAL_MODEL), (bare, None)):
        store = await open_store(where)
        try:
            await tell(store, 'support', FACTS, scope='acme', embedder=embedder)
        finally:
            await store.close()
    body = {'conversation_id': 'support', 'query': 'delivery address for that package', 'role': 'user'}
    with serving(create_app(path, tokens={TOKEN: 'acme'})) as api:
        stores_model = api.request('POST', SEARCH, token=TOKEN, json_body={**body, 'mode': 'semantic'})
        plain = api.request('POST', SEARCH, token=TOKEN, json_body=body)
    # Without an embedder, meaning asked for embeds the query with the model the store's vectors were made with.
    assert stores_model.status == 200 and stores_model.json()['hits'][0]['excerpt'] == FACTS[1]
    assert plain.status == 200 and FACTS[1] not in [hit['excerpt'] for hit in plain.json()['hits']]
    with serving(create_app(bare, tokens={TOKEN: 'acme'})) as api:
        refused = api.request('POST', SEARCH, token=TOKEN, json_body={**body, 'mode': 'semantic'})
    assert refused.status == 400 and refused.json()['error']['code'] == 'invalid_parameters'
    assert '--embedder' in refused.json()['error']['message']
    with serving(create_app(path, tokens={TOKEN: 'acme'}, embedder=Embedder(_Other()))) as api:
        other = api.request('POST', SEARCH, token=TOKEN, json_body=body)
    assert other.status == 503 and other.json()['error']['code'] == 'embedder_unavailable'
    with serving(create_app(path, tokens={TOKEN: 'acme'}, embedder=LOCAL_MODEL)) as api:
        found = api.request('POST', SEARCH, token=TOKEN, json_body=body)
    assert found.status == 200
    top = found.json()['hits'][0]
    assert (top['excerpt'], top['found_by']) == (FACTS[1], ['semantic'])
