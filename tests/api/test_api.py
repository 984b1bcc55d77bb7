"""The HTTP search API over real HTTP on loopback: status codes, tenant isolation, limits, OpenAPI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import schemathesis
import schemathesis.checks
from hypothesis import HealthCheck, given, settings
from openapi_spec_validator import validate as validate_openapi
from pydantic_ai.messages import ModelMessagesTypeAdapter
from schemathesis import GenerationMode

from temporal_recall.api import MAX_BODY_BYTES, create_app, load_tokens
from temporal_recall.errors import ConfigurationError
from temporal_recall.models import SearchRequest
from temporal_recall.search.plan import search_index
from temporal_recall.store import open_store

from ..store._support import BRIEFED_HITS, run_briefed_agent
from ._http import Client, Response, serving
from .conftest import (
    ACME,
    ACME_CONVERSATIONS,
    GLOBEX,
    GLOBEX_CONVERSATIONS,
    TOKENS,
    UNSCOPED_CONVERSATIONS,
)

SEARCH = '/api/v1/conversations/search'
LIST = '/api/v1/conversations'
UNSCOPED = 'unscoped-token-0123456789abcdef'


def conversation_path(conversation_id: str) -> str:
    return f'{LIST}/{conversation_id}'


def error_of(response: Response) -> dict[str, str]:
    assert response.headers['content-type'].startswith('application/json')
    body = response.json()
    assert set(body) == {'error'} and set(body['error']) == {'code', 'message'}
    return body['error']


# --- 200 ---------------------------------------------------------------------------------------------


async def test_search_answers_the_hits_the_library_finds(api: Client, api_store: tuple[Path, dict[str, str]]) -> None:
    response = api.post(SEARCH, token=ACME, json_body={'conversation_id': 'support-42', 'query': 'Harbour Street'})

    assert response.status == 200
    store = await open_store(api_store[0])
    try:
        expected = await search_index(
            store, SearchRequest(query='Harbour Street', conversation_id='support-42', scope='acme')
        )
    finally:
        await store.close()
    assert response.json() == {'hits': [hit.model_dump(mode='json') for hit in expected.hits]}
    assert response.json()['hits'][0]['excerpt'].startswith('Order A-1042 leaves the Leith depot')


def test_search_without_a_conversation_searches_the_tokens_whole_scope(api: Client) -> None:
    """As `recall search all --scope` and `search_messages(conversation_id=None)` do; the token picks the scope."""
    for body in ({'query': 'order A-1042 invoice'}, {'query': 'order A-1042 invoice', 'conversation_id': None}):
        acme = api.post(SEARCH, token=ACME, json_body=body)
        globex = api.post(SEARCH, token=GLOBEX, json_body=body)
        assert acme.status == 200, acme.body
        assert {hit['conversation_id'] for hit in acme.json()['hits']} == {'support-42', 'acme-billing'}
        assert {hit['conversation_id'] for hit in globex.json()['hits']} == {'globex-7'}


def test_search_without_matches_answers_an_empty_list(api: Client) -> None:
    response = api.post(SEARCH, token=ACME, json_body={'conversation_id': 'support-42', 'query': 'zeppelin'})
    assert (response.status, response.json()) == (200, {'hits': []})


async def test_search_limit_and_run_filter(api: Client, api_store: tuple[Path, dict[str, str]]) -> None:
    first_run = api_store[1]['support-42']
    body: dict[str, Any] = {'conversation_id': 'support-42', 'query': 'order A-1042 deliver'}
    answered = {
        what: api.post(SEARCH, token=ACME, json_body={**body, **options}).json()['hits']
        for what, options in (('everything', {}), ('limit', {'limit': 1}), ('first run', {'run_id': first_run}))
    }
    # Both runs' six messages match; the first, best first, or only the first run's four.
    assert {what: [hit['position'] for hit in hits] for what, hits in answered.items()} == {
        'everything': [0, 2, 4, 5, 3, 1],
        'limit': [0],
        'first run': [0, 2, 3, 1],
    }
    assert {hit['run_id'] for hit in answered['first run']} == {first_run}
    store = await open_store(api_store[0])
    try:
        everything = await search_index(store, SearchRequest(**body, scope='acme'))
    finally:
        await store.close()
    assert answered['everything'] == [hit.model_dump(mode='json') for hit in everything.hits]


def test_list_answers_the_tokens_scope_newest_first(api: Client) -> None:
    response = api.get(LIST, token=ACME)

    assert response.status == 200
    listed = response.json()['conversations']
    assert [c['conversation_id'] for c in listed] == ['support-42', 'acme-billing']  # support-42 was saved last
    assert {c['scope'] for c in listed} == {'acme'}
    assert set(listed[0]) == {
        'conversation_id',
        'scope',
        'updated_at',
        'head_id',
        'branches',
        'forked_from',
        'title',
        'metadata',
    }
    assert [(c['title'], c['metadata']) for c in listed] == [('Order A-1042', None), (None, None)]
    assert [c['conversation_id'] for c in api.get(f'{LIST}?limit=1', token=ACME).json()['conversations']] == [
        'support-42'
    ]


def test_get_answers_the_record_and_the_transcript(api: Client) -> None:
    response = api.get(conversation_path('support-42'), token=ACME)

    assert response.status == 200
    body = response.json()
    assert body['conversation']['conversation_id'] == 'support-42'
    assert body['conversation']['scope'] == 'acme'
    messages = body['messages']
    assert [m['position'] for m in messages] == list(range(len(messages)))
    assert [m['role'] for m in messages] == ['user', 'assistant', 'tool', 'assistant', 'user', 'assistant']
    assert messages[0]['text'] == 'Where is order A-1042?'
    assert messages[-1]['text'] == 'Noted: Thanks! Deliver after 5pm please.'
    restored = ModelMessagesTypeAdapter.validate_python([m['message'] for m in messages])
    assert len(restored) == len(messages)
    assert body['conversation']['head_id'] == messages[-1]['entry_id']


# --- 400 ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ('body', 'mentions'),
    [
        ({'conversation_id': 'support-42'}, 'query'),
        ({'conversation_id': 'support-42', 'query': 'order', 'limit': 0}, 'limit'),
        ({'conversation_id': 'support-42', 'query': 'order', 'limit': 101}, 'limit'),
        ({'conversation_id': 'support-42', 'query': 'order', 'limit': '5'}, 'limit'),
        ({'conversation_id': 'support-42', 'query': 'order', 'limit': True}, 'limit'),
        ({'conversation_id': 'support-42', 'query': 'order', 'limit': 2.5}, 'limit'),
        ({'conversation_id': 'support-42', 'query': 'order', 'scope': 'globex'}, 'scope'),
        ({'conversation_id': 'support-42', 'query': 42}, 'query'),
        ({'conversation_id': '', 'query': 'order'}, 'conversation_id'),
        ([], 'body'),
    ],
)
def test_search_refuses_missing_or_malformed_fields(api: Client, body: Any, mentions: str) -> None:
    response = api.post(SEARCH, token=ACME, json_body=body)
    assert response.status == 400
    error = error_of(response)
    assert error['code'] == 'bad_request'
    assert mentions in error['message']


@pytest.mark.parametrize('query', ['', '   ', '?!…'])
def test_search_refuses_an_empty_query(api: Client, query: str) -> None:
    response = api.post(SEARCH, token=ACME, json_body={'conversation_id': 'support-42', 'query': query})
    assert response.status == 400
    assert error_of(response)['code'] == 'invalid_query'


@pytest.mark.parametrize('body', [b'{"conversation_id": "support-42", "query": ', b'not json at all', b'\xff\xfe'])
def test_search_refuses_malformed_json(api: Client, body: bytes) -> None:
    response = api.post(SEARCH, token=ACME, body=body, headers={'Content-Type': 'application/json'})
    assert response.status == 400
    assert error_of(response)['code'] == 'bad_request'


@pytest.mark.parametrize('limit', ['0', '101', 'abc', '-1'])
def test_list_refuses_a_bad_limit(api: Client, limit: str) -> None:
    response = api.get(f'{LIST}?limit={limit}', token=ACME)
    assert response.status == 400
    assert 'limit' in error_of(response)['message']


# --- 401 ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    'headers',
    [
        {},
        {'Authorization': 'Bearer wrong-token-0123456789abcdef'},
        {'Authorization': f'Bearer {ACME[:-1]}'},  # a prefix of a real token
        {'Authorization': f'Bearer {ACME}x'},
        {'Authorization': f'Bearer {ACME.upper()}'},
        {'Authorization': f'Basic {ACME}'},
        {'Authorization': 'Bearer'},
        {'Authorization': 'Bearer '},
        {'Authorization': ACME},
    ],
    ids=['none', 'unknown', 'prefix', 'suffix', 'case', 'basic', 'empty', 'blank', 'no-scheme'],
)
@pytest.mark.parametrize(
    ('method', 'path'), [('POST', SEARCH), ('GET', LIST), ('GET', conversation_path('support-42'))]
)
def test_requests_without_a_known_token_are_refused(
    api: Client, headers: dict[str, str], method: str, path: str
) -> None:
    body = {'conversation_id': 'support-42', 'query': 'order'} if method == 'POST' else None
    response = api.request(method, path, json_body=body, headers=headers)
    assert response.status == 401
    assert response.headers['www-authenticate'] == 'Bearer'
    assert error_of(response)['code'] == 'unauthorized'


def test_authentication_comes_before_parsing(api: Client) -> None:
    # An unauthenticated client learns nothing, not even whether its body would have parsed.
    response = api.post(SEARCH, body=b'{broken', headers={'Content-Type': 'application/json'})
    assert response.status == 401


def test_the_bearer_scheme_is_case_insensitive(api: Client) -> None:
    response = api.get(LIST, headers={'Authorization': f'bearer {ACME}'})
    assert response.status == 200


# --- 404 and isolation -------------------------------------------------------------------------------


def _same_shape(response: Response, conversation_id: str) -> bytes:
    return response.body.replace(conversation_id.encode(), b'<id>')


@pytest.mark.parametrize(('token', 'foreign'), [(ACME, 'globex-7'), (GLOBEX, 'support-42'), (ACME, 'public-1')])
def test_another_scopes_conversation_answers_exactly_like_a_missing_one(api: Client, token: str, foreign: str) -> None:
    missing = 'no-such-conversation'
    for path_of in (conversation_path,):
        found = api.get(path_of(foreign), token=token)
        absent = api.get(path_of(missing), token=token)
        assert found.status == absent.status == 404
        assert _same_shape(found, foreign) == _same_shape(absent, missing)
    searched = api.post(SEARCH, token=token, json_body={'conversation_id': foreign, 'query': 'order'})
    searched_absent = api.post(SEARCH, token=token, json_body={'conversation_id': missing, 'query': 'order'})
    assert searched.status == searched_absent.status == 404
    assert _same_shape(searched, foreign) == _same_shape(searched_absent, missing)
    assert error_of(searched) == {'code': 'not_found', 'message': f'No conversation {foreign!r} in this scope.'}


def test_a_token_only_ever_sees_its_own_scope(api: Client) -> None:
    for token, own in ((ACME, ACME_CONVERSATIONS), (GLOBEX, GLOBEX_CONVERSATIONS)):
        listed = {c['conversation_id'] for c in api.get(LIST, token=token).json()['conversations']}
        assert listed == set(own)
        everything = (*ACME_CONVERSATIONS, *GLOBEX_CONVERSATIONS, *UNSCOPED_CONVERSATIONS)
        for conversation_id in everything:
            got = api.get(conversation_path(conversation_id), token=token)
            searched = api.post(SEARCH, token=token, json_body={'conversation_id': conversation_id, 'query': 'order'})
            expected = 200 if conversation_id in own else 404
            assert (got.status, searched.status) == (expected, expected), conversation_id
            for hit in searched.json().get('hits', []):
                assert hit['conversation_id'] in own


def test_unknown_routes_and_methods(api: Client) -> None:
    assert api.get('/api/v1/nothing-here', token=ACME).status == 404
    assert error_of(api.get('/api/v1/nothing-here', token=ACME))['code'] == 'not_found'
    wrong_method = api.request('DELETE', conversation_path('support-42'), token=ACME)
    assert wrong_method.status == 405
    assert error_of(wrong_method)['code'] == 'method_not_allowed'
    assert api.get(SEARCH, token=ACME).status == 404  # GET on the search path reads a conversation named "search"


# --- 413 ---------------------------------------------------------------------------------------------


def test_a_body_over_64_kib_is_refused_from_its_content_length(api: Client) -> None:
    body = json.dumps({'conversation_id': 'support-42', 'query': 'order ' * 20_000}).encode()
    assert len(body) > MAX_BODY_BYTES
    response = api.post(SEARCH, token=ACME, body=body, headers={'Content-Type': 'application/json'})
    assert response.status == 413
    assert error_of(response)['code'] == 'payload_too_large'


def test_a_chunked_body_over_64_kib_is_refused_while_it_streams(api: Client) -> None:
    response = api.post(SEARCH, token=ACME, body=b'x' * (MAX_BODY_BYTES * 2), chunked=True)
    assert response.status == 413


def test_a_body_of_exactly_64_kib_is_parsed(api: Client) -> None:
    prefix = b'{"conversation_id": "support-42", "query": "order'
    suffix = b'"}'
    body = prefix + b' a' * ((MAX_BODY_BYTES - len(prefix) - len(suffix)) // 2) + suffix
    body += b' ' * (MAX_BODY_BYTES - len(body))
    assert len(body) == MAX_BODY_BYTES
    response = api.post(SEARCH, token=ACME, body=body, headers={'Content-Type': 'application/json'})
    assert response.status == 200


# --- 503 ---------------------------------------------------------------------------------------------


async def test_a_closed_store_answers_503(tmp_path: Path) -> None:
    store = await open_store(tmp_path / 'recall.db')
    await store.close()
    with serving(create_app(store, tokens=TOKENS)) as client:
        for response in (
            client.post(SEARCH, token=ACME, json_body={'conversation_id': 'support-42', 'query': 'order'}),
            client.get(LIST, token=ACME),
            client.get(conversation_path('support-42'), token=ACME),
        ):
            assert response.status == 503
            error = error_of(response)
            assert error['code'] == 'store_unavailable'
            assert str(tmp_path) not in error['message']  # no server paths in answers


async def test_an_unreachable_store_answers_503_until_it_can_be_opened(
    tmp_path: Path, api_store: tuple[Path, dict[str, str]]
) -> None:
    folder = tmp_path / 'not-yet'
    with serving(create_app(folder / 'recall.db', tokens=TOKENS)) as client:
        assert client.get(LIST, token=ACME).status == 503
        folder.mkdir()
        shutil.copyfile(api_store[0], folder / 'recall.db')
        response = client.get(LIST, token=ACME)
        assert response.status == 200
        assert {c['conversation_id'] for c in response.json()['conversations']} == set(ACME_CONVERSATIONS)


async def test_a_file_that_is_not_a_store_answers_503(tmp_path: Path) -> None:
    path = tmp_path / 'notes.db'
    path.write_text('not a database\n' * 200)
    with serving(create_app(path, tokens=TOKENS)) as client:
        assert client.get(LIST, token=ACME).status == 503


# --- configuration -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ('tokens', 'problem'),
    [
        ({}, 'No API tokens'),
        ({'short': 'acme'}, 'shorter than'),
        ({'has whitespace inside it!': 'acme'}, 'whitespace'),
        ({ACME: ''}, 'empty scope'),
    ],
)
def test_create_app_refuses_unusable_tokens(tokens: dict[str, str], problem: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=problem):
        create_app(tmp_path / 'recall.db', tokens=tokens)


def test_load_tokens_reads_a_json_object(tmp_path: Path) -> None:
    path = tmp_path / 'tokens.json'
    path.write_text(json.dumps(TOKENS))
    assert load_tokens(path) == TOKENS
    path.write_text(json.dumps({**TOKENS, UNSCOPED: None}))
    assert load_tokens(path) == {**TOKENS, UNSCOPED: None}, 'null: the conversations stored without a scope'


def test_a_token_mapped_to_null_reads_only_the_conversations_stored_without_a_scope(
    api_store: tuple[Path, dict[str, str]],
) -> None:
    with serving(create_app(api_store[0], tokens={**TOKENS, UNSCOPED: None})) as client:
        listed = client.get('/api/v1/conversations', token=UNSCOPED)
        acme = client.get('/api/v1/conversations/support-42', token=UNSCOPED)
        own = client.get(f'/api/v1/conversations/{UNSCOPED_CONVERSATIONS[0]}', token=UNSCOPED)
    assert listed.status == 200
    assert [c['conversation_id'] for c in listed.json()['conversations']] == list(UNSCOPED_CONVERSATIONS)
    assert acme.status == 404 and own.status == 200


@pytest.mark.parametrize(
    ('content', 'problem'),
    [
        (None, 'Cannot read'),
        ('{"a": ', 'not valid JSON'),
        ('["token"]', 'one JSON object'),
        ('{"acme-token-0123456789abcdef": 7}', 'one JSON object'),
        ('{"short": "acme"}', 'shorter than'),
    ],
)
def test_load_tokens_names_the_problem(tmp_path: Path, content: str | None, problem: str) -> None:
    path = tmp_path / 'tokens.json'
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigurationError, match=problem):
        load_tokens(path)


# --- OpenAPI -----------------------------------------------------------------------------------------


def test_openapi_document_is_valid_and_public(api: Client) -> None:
    response = api.get('/openapi.json')
    assert response.status == 200
    document = response.json()
    validate_openapi(document)
    operations = {
        (method.upper(), path): operation
        for path, item in document['paths'].items()
        for method, operation in item.items()
    }
    assert set(operations) == {
        ('POST', SEARCH),
        ('GET', LIST),
        ('GET', f'{LIST}/{{conversation_id}}'),
    }
    for operation in operations.values():
        assert operation['security'] == [{'HTTPBearer': []}]
        assert '401' in operation['responses'] and '422' not in operation['responses']
    assert document['components']['securitySchemes']['HTTPBearer']['scheme'] == 'bearer'
    assert document['components']['schemas']['SearchBody']['additionalProperties'] is False


# --- every documented operation, generated from the document ----------------------------------------
#
# schemathesis drives hypothesis directly here: its pytest integration (`from_fixture`/`parametrize`)
# reads `Function._nodeid`, which pytest 9 no longer has.

CONFORMANCE_EXAMPLES = 25


@pytest.mark.parametrize('mode', [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
def test_every_operation_conforms_to_the_openapi_document(api: Client, mode: GenerationMode) -> None:
    schema = schemathesis.openapi.from_url(f'{api.base_url}/openapi.json')
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {(operation.method.upper(), operation.path) for operation in operations} == {
        ('POST', SEARCH),
        ('GET', LIST),
        ('GET', f'{LIST}/{{conversation_id}}'),
    }
    # Schema-valid queries can still hold no words ("?!"), which the search refuses with 400, so
    # positive_data_acceptance cannot hold for the search; every other built-in check runs.
    excluded = [schemathesis.checks.positive_data_acceptance]
    for operation in operations:

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=CONFORMANCE_EXAMPLES,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def conforms(case: schemathesis.Case) -> None:
            with_token(case)
            case.call_and_validate(base_url=api.base_url, excluded_checks=excluded)

        conforms()


def with_token(case: schemathesis.Case) -> None:
    """Swap a well-formed generated bearer credential for a real one; a missing or malformed
    header (a negative case) is sent as generated, and must be refused."""
    headers = dict(case.headers or {})
    if str(headers.get('Authorization', '')).startswith('Bearer '):
        headers['Authorization'] = f'Bearer {ACME}'
        case.headers = headers


def test_search_role_filter(api: Client) -> None:
    """`role` keeps one speaker's hits: the tool's return, the user's prompt, never another scope's."""
    body: dict[str, Any] = {'conversation_id': 'support-42', 'query': 'order A-1042'}
    everything = api.post(SEARCH, token=ACME, json_body=body).json()['hits']
    roles = {hit['role'] for hit in everything}
    assert {'user', 'tool', 'assistant'} <= roles
    for role in ('user', 'assistant', 'tool'):
        hits = api.post(SEARCH, token=ACME, json_body={**body, 'role': role}).json()['hits']
        assert hits and {hit['role'] for hit in hits} == {role}
        assert [hit['position'] for hit in hits] == [hit['position'] for hit in everything if hit['role'] == role]
    refused = api.post(SEARCH, token=ACME, json_body={**body, 'role': 'robot'})
    assert refused.status == 400
    assert 'role' in refused.body.decode()


async def test_search_role_finds_a_system_prompt_only_as_the_systems(tmp_path: Path) -> None:
    """An agent's system prompt rides the request of the first user prompt; `role` tells them apart."""
    path = tmp_path / 'briefed.db'
    async with await open_store(str(path)) as store:
        await run_briefed_agent(store, scope='acme')
    with serving(create_app(path, tokens=TOKENS)) as client:
        for (query, role), hits in BRIEFED_HITS.items():
            body = {'conversation_id': 'briefed', 'query': query, 'role': role}
            answer = client.post(SEARCH, token=ACME, json_body=body)
            found = [(hit['position'], hit['role'], hit['excerpt']) for hit in answer.json()['hits']]
            assert (answer.status, found) == (200, hits), role
