"""Bodies written by the worker's codec in two tenant scopes, and a codec server over the same store."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelRequest, ModelResponse, TextPart
from temporalio.api.common.v1 import Payload

from temporal_recall import RecallDataCodec
from temporal_recall.api import create_codec_app

from ..api._http import Client, serving

ACME = 'acme-token-0123456789abcdef'
GLOBEX = 'globex-token-0123456789abcdef'
TOKENS = {ACME: 'acme', GLOBEX: 'globex'}
UI_ORIGIN = 'http://ui.example.test:8233'

ACME_TEXT = 'The Leith depot ships order A-1042 at 16:00'


def conversation(text: str, turns: int = 6) -> list[ModelMessage]:
    messages: list[ModelMessage] = []
    for turn in range(turns):
        messages.append(ModelRequest.user_text_prompt(f'Question {turn}: where is order A-1042?'))
        messages.append(ModelResponse(parts=[TextPart(f'{text} (turn {turn}).')]))
    return messages


def json_payload(value: Any) -> Payload:
    return Payload(metadata={'encoding': b'json/plain'}, data=json.dumps(value, separators=(',', ':')).encode())


def messages_payload(text: str) -> Payload:
    return json_payload(ModelMessagesTypeAdapter.dump_python(conversation(text), mode='json'))


def document(payloads: list[Payload]) -> dict[str, Any]:
    """The JSON payloads document, as the Web UI sends it (proto3 JSON: bytes in base64)."""
    return {
        'payloads': [
            {
                'metadata': {key: base64.b64encode(value).decode() for key, value in payload.metadata.items()},
                'data': base64.b64encode(payload.data).decode(),
            }
            for payload in payloads
        ]
    }


def payloads_of(answer: dict[str, Any]) -> list[Payload]:
    return [
        Payload(
            metadata={key: base64.b64decode(value) for key, value in item.get('metadata', {}).items()},
            data=base64.b64decode(item.get('data', '')),
        )
        for item in answer['payloads']
    ]


async def encoded_by_worker(store_url: str, scope: str | None, payloads: list[Payload]) -> list[Payload]:
    """What a worker's codec in `scope` puts into history for `payloads` (writing the bodies)."""
    codec = RecallDataCodec(store_url, scope=scope)
    try:
        return await codec.encode(payloads)
    finally:
        await codec.aclose()


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return str(tmp_path / 'recall.db')


@pytest.fixture
def codec_server(store_url: str) -> Iterator[Client]:
    with serving(create_codec_app(store_url, tokens=TOKENS, allowed_origins=[UI_ORIGIN])) as client:
        yield client
