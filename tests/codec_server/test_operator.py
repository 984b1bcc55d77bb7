"""An operator token (`{"<token>": {"operator": true}}`) decodes every scope's bodies in the codec server, and
reads nothing anywhere else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from temporal_recall.api import create_app, create_codec_app, load_tokens
from temporal_recall.errors import ConfigurationError

from ..api._http import serving
from .conftest import ACME, ACME_TEXT, TOKENS, document, encoded_by_worker, messages_payload, payloads_of

OPERATOR = 'operator-token-0123456789abcdef'


async def test_an_operator_token_decodes_every_scope(any_store_url: str) -> None:
    acme, unscoped = messages_payload(ACME_TEXT), messages_payload('stored by the stock worker ' * 20)
    [acme_encoded] = await encoded_by_worker(any_store_url, 'acme', [acme])
    [unscoped_encoded] = await encoded_by_worker(any_store_url, None, [unscoped])
    tokens = {**TOKENS, OPERATOR: {'operator': True}}
    with serving(create_codec_app(any_store_url, tokens=tokens)) as server:
        operator = server.post('/decode', token=OPERATOR, json_body=document([acme_encoded, unscoped_encoded]))
        tenant = server.post('/decode', token=ACME, json_body=document([acme_encoded, unscoped_encoded]))
        encode = server.post('/encode', token=OPERATOR, json_body=document([acme]))
    assert operator.status == 200, operator.body
    assert payloads_of(operator.json()) == [acme, unscoped]
    assert payloads_of(tenant.json()) == [acme, unscoped_encoded], 'a tenant token still reads only its scope'
    assert (encode.status, encode.json()['error']['code']) == (403, 'forbidden')


def test_an_operator_token_is_not_a_search_api_token(tmp_path: Path) -> None:
    with serving(create_app(tmp_path / 'recall.db', tokens={**TOKENS, OPERATOR: {'operator': True}})) as api:
        assert api.get('/api/v1/conversations', token=OPERATOR).status == 401
        assert api.get('/api/v1/conversations', token=ACME).status == 200
    with pytest.raises(ConfigurationError, match='only operator tokens'):
        create_app(tmp_path / 'recall.db', tokens={OPERATOR: {'operator': True}})


@pytest.mark.parametrize('value', [{'operator': False}, {'operator': True, 'scope': 'acme'}, {'operator': 'yes'}, {}])
def test_anything_else_than_operator_true_is_refused(tmp_path: Path, value: object) -> None:
    path = tmp_path / 'tokens.json'
    path.write_text(json.dumps({OPERATOR: value}))
    with pytest.raises(ConfigurationError, match='operator'):
        load_tokens(path)


def test_the_tokens_file_reads_an_operator_token(tmp_path: Path) -> None:
    path = tmp_path / 'tokens.json'
    path.write_text(json.dumps({OPERATOR: {'operator': True}, ACME: 'acme'}))
    assert load_tokens(path) == {OPERATOR: {'operator': True}, ACME: 'acme'}
    short = tmp_path / 'short.json'
    short.write_text(json.dumps({'short': {'operator': True}}))
    with pytest.raises(ConfigurationError, match='shorter than 16'):
        load_tokens(short)
