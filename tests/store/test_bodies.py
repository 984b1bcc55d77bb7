"""The message-body store behind `RecallDataCodec`, on every backend: by hash, per scope, written once."""

from __future__ import annotations

from pydantic_ai.durable_exec.temporal import PydanticAIPayloadConverter
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from temporal_recall.codec import RecallDataCodec
from temporal_recall.models import StepDelta

from ._support import AnyStore

HISTORY = [
    ModelRequest(parts=[UserPromptPart('Where is order A-1042? ' + 'x' * 3000)]),
    ModelResponse(parts=[TextPart('It shipped. ' + 'y' * 3000)]),
]


async def test_bodies_are_kept_per_scope_and_never_overwritten(recall_store: AnyStore) -> None:
    await recall_store.put_bodies('acme', {'h1': b'first', 'h2': b'\x00binary\xff'})
    await recall_store.put_bodies('acme', {'h1': b'not written again'})
    await recall_store.put_bodies(None, {'h1': b'unscoped'})
    await recall_store.put_bodies('acme', {})
    assert await recall_store.get_bodies('acme', ['h1', 'h2', 'missing']) == {'h1': b'first', 'h2': b'\x00binary\xff'}
    assert await recall_store.get_bodies(None, ['h1', 'h2']) == {'h1': b'unscoped'}
    assert await recall_store.get_bodies('', ['h1']) == {}
    assert await recall_store.get_bodies('acme', []) == {}


async def test_the_codec_round_trips_through_the_store(recall_store: AnyStore) -> None:
    delta = StepDelta(conversation_id='c', idempotency_key='k', messages=list(HISTORY))
    original = PydanticAIPayloadConverter().to_payloads([delta])[0]
    [encoded] = await RecallDataCodec(recall_store, scope='acme').encode([original])
    assert b'A-1042' not in encoded.data
    [decoded] = await RecallDataCodec(recall_store, scope='acme').decode([encoded])  # a fresh cache: from the store
    restored = PydanticAIPayloadConverter().from_payloads([decoded], [StepDelta])[0]
    assert restored.messages == HISTORY
