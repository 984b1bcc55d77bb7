"""RecallDataCodec: messages leave payloads for the store and come back intact, or fail loudly."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from pydantic_ai.durable_exec.temporal import PydanticAIPayloadConverter
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart
from temporalio.api.common.v1 import Payload

from temporal_recall._codec import ENCODING, MissingMessageBody, RecallDataCodec
from temporal_recall.models import StepDelta
from temporal_recall.store import SqliteConversationStore

HISTORY = [
    ModelRequest(parts=[UserPromptPart('Where is order A-1042? ' + 'x' * 3000)]),
    ModelResponse(parts=[ToolCallPart('lookup_order', {'order_id': 'A-1042'}, tool_call_id='c1')]),
    ModelResponse(parts=[TextPart('It shipped. ' + 'y' * 3000)]),
]


def _payload(messages=HISTORY) -> Payload:
    delta = StepDelta(conversation_id='c', idempotency_key='k', messages=list(messages))
    return PydanticAIPayloadConverter().to_payloads([delta])[0]


@pytest.fixture
async def store(tmp_path: Path):
    opened = await SqliteConversationStore.open(tmp_path / 'bodies.db')
    try:
        yield opened
    finally:
        await opened.close()


async def test_messages_are_replaced_by_references_and_restored(store):
    original = _payload()
    [encoded] = await RecallDataCodec(store, scope='acme').encode([original])
    assert encoded.metadata['encoding'] == ENCODING
    assert len(encoded.data) < len(original.data) / 10
    assert b'A-1042' not in encoded.data
    # A fresh codec has an empty cache: the bodies can only come from the store.
    [decoded] = await RecallDataCodec(store, scope='acme').decode([encoded])
    assert decoded.metadata['encoding'] == original.metadata['encoding']
    restored = PydanticAIPayloadConverter().from_payloads([decoded], [StepDelta])[0]
    assert restored.messages == HISTORY


async def test_small_and_non_json_payloads_stay_inline(store):
    small = _payload(HISTORY[1:2])
    binary = Payload(metadata={'encoding': b'binary/plain'}, data=b'\x00' * 10_000)
    assert await RecallDataCodec(store).encode([small, binary]) == [small, binary]


async def test_each_body_is_stored_once_across_payloads(store, tmp_path: Path):
    codec = RecallDataCodec(store, scope='acme')
    await codec.encode([_payload(), _payload(HISTORY[:2])])
    await RecallDataCodec(store, scope='acme').encode([_payload()])
    with sqlite3.connect(tmp_path / 'bodies.db') as db:
        assert db.execute('SELECT count(*) FROM message_bodies').fetchone()[0] == len(HISTORY)


async def test_a_missing_body_fails_loudly_with_hash_and_scope(store, tmp_path: Path):
    [encoded] = await RecallDataCodec(store, scope='acme').encode([_payload()])
    with sqlite3.connect(tmp_path / 'bodies.db') as db:
        db.execute('DELETE FROM message_bodies')
    digests = {ref['$recall'] for ref in json.loads(encoded.data)['messages']}
    with pytest.raises(MissingMessageBody, match="scope 'acme'") as missing:
        await RecallDataCodec(store, scope='acme').decode([encoded])
    assert any(digest in str(missing.value) for digest in digests)


async def test_a_corrupted_body_is_detected(store, tmp_path: Path):
    [encoded] = await RecallDataCodec(store, scope='acme').encode([_payload()])
    with sqlite3.connect(tmp_path / 'bodies.db') as db:
        db.execute('UPDATE message_bodies SET body = CAST(\'{"kind":"request","parts":[]}\' AS BLOB)')
    with pytest.raises(MissingMessageBody, match='does not match its hash'):
        await RecallDataCodec(store, scope='acme').decode([encoded])


async def test_one_tenants_references_do_not_resolve_another_tenants_bodies(store):
    [encoded] = await RecallDataCodec(store, scope='acme').encode([_payload()])
    with pytest.raises(MissingMessageBody, match="'globex'"):
        await RecallDataCodec(store, scope='globex').decode([encoded])


async def test_an_unreachable_store_fails_encoding_instead_of_dropping_data(tmp_path: Path):
    codec = RecallDataCodec(str(tmp_path / 'missing-dir' / 'bodies.db'), scope='acme')
    with pytest.raises(Exception, match='does not exist'):
        await codec.encode([_payload()])
