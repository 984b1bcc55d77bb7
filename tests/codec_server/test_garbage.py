"""Whatever a caller sends, the codec server answers with a documented status, on both backends.

Invalid payload data is a 400 naming the payload; a reference that cannot be a hash is refused
before any store read (on PostgreSQL a NUL byte or a lone surrogate in it used to reach asyncpg and
answer 500); base64 is read strictly; one bad payload never costs the others of its request.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Iterator

import pytest
from temporalio.api.common.v1 import Payload

from temporal_recall.api import create_codec_app

from ..api._http import Client, serving
from .conftest import ACME, ACME_TEXT, TOKENS, document, encoded_by_worker, json_payload, messages_payload, payloads_of

REFS = b'binary/temporal-recall-refs'
PADDING = ' ' * 600
"""Enough to put a payload over the codec's 512-byte threshold, where it is parsed."""

UNSTORABLE = {
    'invalid JSON': b'{"text": "' + PADDING.encode() + b'"',
    'invalid UTF-8': b'{"text": "\xff\xfe' + PADDING.encode() + b'"}',
    'escaped lone surrogate': b'{"text": "\\ud800' + PADDING.encode() + b'"}',
    'deep nesting': b'[' * 100_000 + b']' * 100_000,
}
"""`json/plain` payloads the SDK's converter never writes, but a codec server's caller can send."""

FORGED_REFERENCES = {
    'NUL byte': '\x00' * 64,
    'lone surrogate': '\ud800' + 'a' * 63,
    'upper case': 'A' * 64,
    'short': 'abc',
    'not hex': 'g' * 64,
}


@pytest.fixture
def server(any_store_url: str) -> Iterator[Client]:
    with serving(create_codec_app(any_store_url, tokens=TOKENS)) as client:
        yield client


def _reference(digest: str) -> Payload:
    # ensure_ascii keeps a lone surrogate as its \ud800 escape, which is what reaches the server.
    data = json.dumps({'$recall': digest}).encode()
    return Payload(metadata={'encoding': REFS, 'temporal-recall-encoding': b'json/plain'}, data=data)


@pytest.mark.parametrize('kind', list(UNSTORABLE))
def test_encode_refuses_unstorable_json_with_a_400_naming_the_payload(server: Client, kind: str) -> None:
    sent = [json_payload({'fine': 'x' * 600}), Payload(metadata={'encoding': b'json/plain'}, data=UNSTORABLE[kind])]

    answer = server.post('/encode', token=ACME, json_body=document(sent))

    assert answer.status == 400, answer.body
    error = answer.json()['error']
    assert error['code'] == 'bad_payload'
    assert error['message'].startswith('Payload 1 is json/plain but not storable JSON'), error


async def test_forged_references_pass_through_and_the_batch_still_decodes(server: Client, any_store_url: str) -> None:
    original = messages_payload(ACME_TEXT)
    [encoded] = await encoded_by_worker(any_store_url, 'acme', [original])
    forged = [_reference(digest) for digest in FORGED_REFERENCES.values()]

    answer = server.post('/decode', token=ACME, json_body=document([*forged, encoded, *forged]))

    assert answer.status == 200, answer.body
    assert payloads_of(answer.json()) == [*forged, original, *forged]


@pytest.mark.parametrize('text', ['QUJD%%%', 'éééé', 'Q', 'QUJD=====', 'QU=D', 'QUJ-D+/'])
def test_bytes_that_are_not_strict_base64_are_refused(server: Client, text: str) -> None:
    for path in ('/encode', '/decode'):
        for payload in ({'data': text}, {'metadata': {'encoding': text}, 'data': 'QUJD'}):
            answer = server.post(path, token=ACME, json_body={'payloads': [{'data': 'QUJD'}, payload]})
            assert answer.status == 400, (path, payload, answer.body)
            assert 'payload 1:' in answer.json()['error']['message'], answer.body


def test_base64_as_proto3_json_allows_it_still_decodes(server: Client) -> None:
    """Standard or URL-safe alphabet, padded or not: what the UI and the Temporal CLI send."""
    for text in ('QUJD', 'QUI', 'QUI=', 'Pz8_', 'Pz8/', ''):
        answer = server.post('/decode', token=ACME, json_body={'payloads': [{'data': text}]})
        assert answer.status == 200, (text, answer.body)


def _garbage_value(rng: random.Random) -> object:
    choices: list[object] = [
        rng.randbytes(rng.randrange(0, 40)).decode('latin-1'),
        rng.choice(['\x00', '\ud800', '\udfff', 'é', '%', '=', '\\', '"']) * rng.randrange(1, 80),
        rng.randrange(-(2**70), 2**70),
        None,
        [],
        {},
        rng.random(),
        True,
    ]
    return rng.choice(choices)


def _garbage_payload(rng: random.Random) -> object:
    kind = rng.randrange(6)
    if kind == 0:
        return _garbage_value(rng)
    data: bytes
    if kind == 1:
        data = json.dumps({'$recall': rng.choice(list(FORGED_REFERENCES.values()))}).encode()
    elif kind == 2:
        data = rng.choice(list(UNSTORABLE.values()))
    elif kind == 3:
        data = json.dumps({'$recall-items': rng.randbytes(32).hex(), 'x': [1] * rng.randrange(300)}).encode()
    else:
        data = rng.randbytes(rng.randrange(0, 2000))
    encoding = rng.choice([b'json/plain', REFS, b'binary/plain', rng.randbytes(5)])
    metadata = {'encoding': base64.b64encode(encoding).decode()}
    if rng.random() < 0.5:
        metadata['temporal-recall-encoding'] = base64.b64encode(rng.choice([b'json/plain', b'\xff'])).decode()
    if rng.random() < 0.2:
        metadata[str(_garbage_value(rng))] = str(_garbage_value(rng))
    payload: dict[str, object] = {'metadata': metadata, 'data': base64.b64encode(data).decode()}
    if rng.random() < 0.15:
        payload['data'] = _garbage_value(rng)
    return payload


def _garbage_body(rng: random.Random) -> bytes:
    kind = rng.randrange(4)
    if kind == 0:
        return rng.randbytes(rng.randrange(0, 300))
    if kind == 1:
        return json.dumps(_garbage_value(rng)).encode()
    payloads = [_garbage_payload(rng) for _ in range(rng.randrange(0, 6))]
    # Without ensure_ascii a lone surrogate cannot be encoded; keep it as an escape, as a client would.
    return json.dumps({'payloads': payloads} if kind == 2 else {'payloads': payloads, 'x': 1}).encode()


def test_no_request_gets_a_server_error(server: Client) -> None:
    rng = random.Random(33)
    statuses: dict[int, int] = {}
    for _ in range(300):
        body = _garbage_body(rng)
        path = rng.choice(['/encode', '/decode'])
        answer = server.post(path, token=ACME, body=body, headers={'Content-Type': 'application/json'})
        assert answer.status < 500, (path, body[:300], answer.body[:300])
        assert answer.headers['content-type'] == 'application/json', answer.body[:300]
        statuses[answer.status] = statuses.get(answer.status, 0) + 1
    assert statuses.keys() == {200, 400}, statuses  # both kinds were reached, nothing else
