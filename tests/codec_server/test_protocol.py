"""Temporal's remote codec protocol over real HTTP: round trips, scopes, tokens, bad input, CORS."""

from __future__ import annotations

import json

from temporalio.api.common.v1 import Payload

from temporal_recall import RecallDataCodec
from temporal_recall.api import CODEC_COOKIE, MAX_CODEC_BODY_BYTES, create_app, create_codec_app
from temporal_recall.store import open_store

from ..api._http import Client, Response, serving
from .conftest import (
    ACME,
    ACME_TEXT,
    GLOBEX,
    TOKENS,
    UI_ORIGIN,
    document,
    encoded_by_worker,
    json_payload,
    messages_payload,
    payloads_of,
)

REFS = b'binary/temporal-recall-refs'
FOREIGN = [
    Payload(metadata={'encoding': b'binary/plain'}, data=b'\x00\x01 not json at all ' * 100),
    json_payload({'small': 'stays inline'}),
    Payload(metadata={'encoding': b'json/protobuf', 'messageType': b'temporal.api.common.v1.Payload'}, data=b'{}'),
    Payload(metadata={'encoding': b'binary/null'}),
    json_payload({'$recall': 'an application value that uses our key ' * 40}),
]
"""Payloads the codec leaves alone: other encodings, small JSON, JSON that already uses our keys."""


async def test_decode_returns_what_the_worker_encoded(codec_server: Client, store_url: str):
    original = messages_payload(ACME_TEXT)
    [encoded] = await encoded_by_worker(store_url, 'acme', [original])
    assert encoded.metadata['encoding'] == REFS
    assert ACME_TEXT.encode() not in encoded.data

    answer = codec_server.post('/decode', token=ACME, json_body=document([encoded]), headers={'X-Namespace': 'default'})

    assert answer.status == 200, answer.body
    assert answer.headers['content-type'] == 'application/json'
    [decoded] = payloads_of(answer.json())
    assert decoded == original


async def test_encode_then_decode_round_trip_over_http(codec_server: Client, store_url: str):
    original = messages_payload(ACME_TEXT)

    encoded_answer = codec_server.post('/encode', token=ACME, json_body=document([original]))
    assert encoded_answer.status == 200, encoded_answer.body
    [encoded] = payloads_of(encoded_answer.json())
    assert encoded.metadata['encoding'] == REFS
    assert len(encoded.data) < len(original.data) / 5

    [decoded] = payloads_of(codec_server.post('/decode', token=ACME, json_body=document([encoded])).json())
    assert decoded == original
    # The server wrote the bodies where a worker's codec of that scope finds them, and only there.
    worker_codec = RecallDataCodec(store_url, scope='acme')
    try:
        assert await worker_codec.decode([encoded]) == [original]
    finally:
        await worker_codec.aclose()


def test_foreign_payloads_pass_through_both_ways(codec_server: Client):
    for path in ('/encode', '/decode'):
        answer = codec_server.post(path, token=ACME, json_body=document(FOREIGN))
        assert answer.status == 200, answer.body
        assert payloads_of(answer.json()) == FOREIGN, path
    empty = codec_server.post('/decode', token=ACME, json_body={'payloads': []})
    assert (empty.status, empty.json()) == (200, {'payloads': []})


async def test_another_scopes_body_answers_like_a_missing_one(codec_server: Client, store_url: str):
    [acme_encoded] = await encoded_by_worker(store_url, 'acme', [messages_payload(ACME_TEXT)])
    missing = Payload(metadata=dict(acme_encoded.metadata), data=json.dumps({'$recall': 'f' * 64}).encode())
    foreign = FOREIGN[0]

    other_scope = codec_server.post('/decode', token=GLOBEX, json_body=document([acme_encoded, foreign]))
    absent = codec_server.post('/decode', token=GLOBEX, json_body=document([missing, foreign]))
    own_missing = codec_server.post('/decode', token=ACME, json_body=document([missing, foreign]))

    for answer, sent in ((other_scope, acme_encoded), (absent, missing), (own_missing, missing)):
        assert answer.status == 200
        assert payloads_of(answer.json()) == [sent, foreign]  # unchanged: still the hash, nothing else
    assert ACME_TEXT.encode() not in other_scope.body
    assert other_scope.headers.keys() == absent.headers.keys()


async def test_a_token_mapped_to_null_decodes_what_an_unscoped_worker_stored(store_url: str):
    """`message_codec_plugin(url)` without a scope (the stock worker's) stores bodies under no scope;
    a token mapped to JSON `null` reads exactly those, and no scoped token does."""
    unscoped = 'unscoped-token-0123456789abcdef'
    original = messages_payload(ACME_TEXT)
    [encoded] = await encoded_by_worker(store_url, None, [original])
    [scoped] = await encoded_by_worker(store_url, 'acme', [messages_payload('acme only ' * 200)])
    with serving(create_codec_app(store_url, tokens={**TOKENS, unscoped: None})) as server:
        own = server.post('/decode', token=unscoped, json_body=document([encoded, scoped]))
        other = server.post('/decode', token=ACME, json_body=document([encoded]))
    assert own.status == 200 and payloads_of(own.json()) == [original, scoped], 'not the acme body'
    assert other.status == 200 and payloads_of(other.json()) == [encoded]


async def test_one_undecodable_payload_does_not_hide_the_others(codec_server: Client, store_url: str):
    original = messages_payload(ACME_TEXT)
    [encoded] = await encoded_by_worker(store_url, 'acme', [original])
    garbage = Payload(metadata={'encoding': REFS}, data=b'{not json')
    no_original_encoding = Payload(metadata={'encoding': REFS}, data=b'{"$recall": "x"}')

    answer = codec_server.post('/decode', token=ACME, json_body=document([garbage, encoded, no_original_encoding]))

    assert answer.status == 200, answer.body
    assert payloads_of(answer.json()) == [garbage, original, no_original_encoding]


async def test_missing_and_bad_tokens_are_refused_alike(codec_server: Client, store_url: str):
    [encoded] = await encoded_by_worker(store_url, 'acme', [messages_payload(ACME_TEXT)])
    body = document([encoded])
    answers = {
        'none': codec_server.post('/decode', json_body=body),
        'unknown': codec_server.post('/decode', token='not-a-token-0123456789abcdef', json_body=body),
        'basic': codec_server.post('/decode', json_body=body, headers={'Authorization': f'Basic {ACME}'}),
        'empty bearer': codec_server.post('/decode', json_body=body, headers={'Authorization': 'Bearer '}),
        'encode': codec_server.post('/encode', json_body=body),
    }
    for name, answer in answers.items():
        assert answer.status == 401, name
        assert answer.json()['error']['code'] == 'unauthorized', name
        assert answer.headers['www-authenticate'] == 'Bearer', name
        assert ACME_TEXT.encode() not in answer.body
    assert len({answer.body for answer in answers.values()}) == 1


async def test_the_ui_cookie_authenticates_json_requests_only(codec_server: Client, store_url: str):
    original = messages_payload(ACME_TEXT)
    [encoded] = await encoded_by_worker(store_url, 'acme', [original])
    cookie = {'Cookie': f'{CODEC_COOKIE}={ACME}'}

    answer = codec_server.post('/decode', token=None, json_body=document([encoded]), headers=cookie)
    assert answer.status == 200, answer.body
    assert payloads_of(answer.json()) == [original]

    as_form = codec_server.post(
        '/decode', body=json.dumps(document([encoded])).encode(), headers={**cookie, 'Content-Type': 'text/plain'}
    )
    assert as_form.status == 415
    assert as_form.json()['error']['code'] == 'unsupported_media_type'

    wrong_cookie = {'Cookie': f'{CODEC_COOKIE}=not-a-token-0123456789abcdef'}
    assert codec_server.post('/decode', json_body=document([encoded]), headers=wrong_cookie).status == 401


def test_malformed_documents_are_a_clear_400(codec_server: Client):
    bodies = {
        'not json': b'{"payloads": [',
        'not utf-8': b'\xff\xfe{}',
        'wrong type': json.dumps({'payloads': 5}).encode(),
        'unknown field': json.dumps({'payloads': [], 'extra': 1}).encode(),
        'data not a string': json.dumps({'payloads': [{'data': 5}]}).encode(),
        'metadata not a map': json.dumps({'payloads': [{'metadata': ['encoding']}]}).encode(),
        'a list': b'[]',
    }
    for name, body in bodies.items():
        answer = codec_server.post('/decode', token=ACME, body=body, headers={'Content-Type': 'application/json'})
        assert answer.status == 400, name
        error = answer.json()['error']
        assert error['code'] == 'bad_request', name
        assert 'JSON payloads document' in error['message'], name


def test_a_payload_of_several_megabytes_is_a_clear_413(codec_server: Client):
    huge = document([json_payload({'text': 'x' * (6 * 1024 * 1024)})])
    assert len(json.dumps(huge)) > MAX_CODEC_BODY_BYTES
    for chunked in (False, True):  # declared length, and a stream without one
        answer = codec_server.post('/decode', token=ACME, json_body=huge, chunked=chunked)
        assert answer.status == 413, chunked
        assert answer.json()['error']['code'] == 'payload_too_large'
        assert str(MAX_CODEC_BODY_BYTES) in answer.json()['error']['message']


def test_other_paths_and_methods(codec_server: Client):
    assert codec_server.get('/decode', token=ACME).status == 405
    missing = codec_server.post('/api/v1/conversations', token=ACME, json_body={})
    assert (missing.status, missing.json()['error']['code']) == (404, 'not_found')


def _preflight(client: Client, origin: str) -> Response:
    return client.request(
        'OPTIONS',
        '/decode',
        headers={
            'Origin': origin,
            'Access-Control-Request-Method': 'POST',
            'Access-Control-Request-Headers': 'authorization,content-type,x-namespace',
        },
    )


def test_cors_preflight_from_an_allowed_and_a_disallowed_origin(codec_server: Client):
    allowed = _preflight(codec_server, UI_ORIGIN)
    assert allowed.status == 200
    assert allowed.headers['access-control-allow-origin'] == UI_ORIGIN
    assert allowed.headers['access-control-allow-credentials'] == 'true'
    allowed_headers = {h.strip().lower() for h in allowed.headers['access-control-allow-headers'].split(',')}
    assert {'authorization', 'content-type', 'x-namespace'} <= allowed_headers
    assert 'POST' in allowed.headers['access-control-allow-methods']

    for origin in ('http://evil.example.test', 'http://ui.example.test:8234', 'null'):
        refused = _preflight(codec_server, origin)
        assert refused.status == 400, origin
        assert 'access-control-allow-origin' not in refused.headers, origin

    # The answers themselves: the UI's origin may read them (errors too); another origin may not.
    ok = codec_server.post('/decode', token=ACME, json_body={'payloads': []}, headers={'Origin': UI_ORIGIN})
    assert ok.headers['access-control-allow-origin'] == UI_ORIGIN
    unauthorized = codec_server.post('/decode', json_body={'payloads': []}, headers={'Origin': UI_ORIGIN})
    assert (unauthorized.status, unauthorized.headers['access-control-allow-origin']) == (401, UI_ORIGIN)
    other = codec_server.post('/decode', token=ACME, json_body={'payloads': []}, headers={'Origin': 'http://evil.test'})
    assert 'access-control-allow-origin' not in other.headers


async def test_mounted_in_the_http_api_app(store_url: str):
    original = messages_payload(ACME_TEXT)
    [encoded] = await encoded_by_worker(store_url, 'acme', [original])
    store = await open_store(store_url)
    try:
        api = create_app(store, tokens=TOKENS)
        api.mount('/codec', create_codec_app(store, tokens=TOKENS))
        with serving(api) as client:
            decoded = client.post('/codec/decode', token=ACME, json_body=document([encoded]))
            refused = client.post('/codec/decode', json_body=document([encoded]))
            listing = client.get('/api/v1/conversations', token=ACME)
    finally:
        await store.close()
    assert decoded.status == 200, decoded.body
    assert payloads_of(decoded.json()) == [original]
    assert refused.status == 401
    assert listing.status == 200


async def test_the_session_form_sets_the_cookie_the_ui_sends(codec_server: Client, store_url: str):
    original = messages_payload(ACME_TEXT)
    [encoded] = await encoded_by_worker(store_url, 'acme', [original])
    form = codec_server.get('/session')
    assert form.status == 200
    assert b'name="token"' in form.body

    def sign_in(token: str, **headers: str) -> Response:
        return codec_server.post(
            '/session',
            body=f'token={token}'.encode(),
            headers={'Content-Type': 'application/x-www-form-urlencoded', **headers},
        )

    signed_in = sign_in(ACME, Origin=codec_server.base_url)
    assert signed_in.status == 200, signed_in.body
    cookie = signed_in.headers['set-cookie']
    assert cookie.startswith(f'{CODEC_COOKIE}={ACME};')
    assert 'HttpOnly' in cookie
    assert 'SameSite=lax' in cookie  # plain http: same-site only
    assert 'Secure' not in cookie
    behind_https = sign_in(ACME, **{'X-Forwarded-Proto': 'https'})
    assert 'SameSite=none' in behind_https.headers['set-cookie']
    assert 'Secure' in behind_https.headers['set-cookie']
    decoded = codec_server.post('/decode', json_body=document([encoded]), headers={'Cookie': cookie.split(';')[0]})
    assert payloads_of(decoded.json()) == [original]

    for refused, status in (
        (sign_in('not-a-token-0123456789abcdef'), 401),
        (sign_in('bad token; Path=/'), 401),
        (sign_in(ACME, Origin='http://evil.example.test'), 403),
    ):
        assert refused.status == status
        assert 'set-cookie' not in refused.headers
