"""RecallDataCodec: messages leave payloads for the store and come back intact, or fail loudly."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.durable_exec.temporal import PydanticAIPayloadConverter
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart
from temporalio.api.common.v1 import Payload

from temporal_recall.codec import ENCODING, MissingMessageBody, RecallDataCodec, UnencodablePayload
from temporal_recall.errors import NotADatabase
from temporal_recall.models import StepDelta
from temporal_recall.store import SqliteConversationStore
from temporal_recall.store.protocol import BODY_TOUCH_INTERVAL

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
    codec = RecallDataCodec(store, threshold_bytes=len(small.data) + 1)
    assert await codec.encode([small, binary]) == [small, binary]


async def test_each_body_is_stored_once_across_payloads(store, tmp_path: Path):
    codec = RecallDataCodec(store, scope='acme')
    await codec.encode([_payload(), _payload(HISTORY[:2])])
    with sqlite3.connect(tmp_path / 'bodies.db') as db:
        before = db.execute('SELECT count(*) FROM message_bodies').fetchone()[0]
    await RecallDataCodec(store, scope='acme').encode([_payload()])
    with sqlite3.connect(tmp_path / 'bodies.db') as db:
        bodies = [json.loads(row[0]) for row in db.execute('SELECT body FROM message_bodies')]
    assert len(bodies) == before
    messages = [body for body in bodies if isinstance(body, dict) and body.get('kind') in ('request', 'response')]
    assert len(messages) == len(HISTORY)


async def test_a_missing_body_fails_loudly_with_hash_and_scope(store, tmp_path: Path):
    [encoded] = await RecallDataCodec(store, scope='acme').encode([_payload()])
    with sqlite3.connect(tmp_path / 'bodies.db') as db:
        digests = {row[0] for row in db.execute('SELECT content_hash FROM message_bodies')}
        db.execute('DELETE FROM message_bodies')
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
    with pytest.raises(NotADatabase, match=re.escape(f'the directory {tmp_path / "missing-dir"} does not exist')):
        await codec.encode([_payload()])


def _json_payload(value: object) -> Payload:
    return Payload(metadata={'encoding': b'json/plain'}, data=json.dumps(value).encode())


async def _stored(tmp_path: Path) -> dict[str, bytes]:
    with sqlite3.connect(tmp_path / 'bodies.db') as db:
        return {row[0]: bytes(row[1]) for row in db.execute('SELECT content_hash, body FROM message_bodies')}


async def test_a_growing_history_adds_only_its_tail_not_a_new_copy(store, tmp_path: Path):
    """Request N+1 re-sends request N's history: the full chunks are reused, only the tail is new."""
    history = [
        ModelRequest(parts=[UserPromptPart(f'question {i} about order A-{i}')])
        if i % 2 == 0
        else ModelResponse(parts=[TextPart(f'answer {i}')])
        for i in range(201)
    ]
    codec = RecallDataCodec(store, scope='acme')
    await codec.encode([_payload(history[:200])])
    before = await _stored(tmp_path)
    [encoded] = await codec.encode([_payload(history)])
    added = {digest: body for digest, body in (await _stored(tmp_path)).items() if digest not in before}
    # The new message and the new list (6 chunk references and a tail of 9 messages). The new root,
    # small once its list is a reference, stays in the payload.
    [message] = [json.loads(body) for body in added.values() if body.startswith(b'{')]
    [listing] = [json.loads(body) for body in added.values() if body.startswith(b'[')]
    assert len(added) == 2
    assert message['parts'][0]['content'] == 'question 200 about order A-200'
    assert [next(iter(item)) for item in listing] == ['$recall-items'] * 6 + ['$recall'] * 9
    assert sum(map(len, added.values())) < 3_000
    assert len(encoded.data) < 300  # a reference to the list, whatever its length
    [decoded] = await RecallDataCodec(store, scope='acme').decode([encoded])
    assert PydanticAIPayloadConverter().from_payloads([decoded], [StepDelta])[0].messages == history


async def test_a_large_part_repeated_across_payloads_is_stored_once(store, tmp_path: Path):
    tools = [{'name': f'tool_{i}', 'description': 'd' * 200, 'schema': {'type': 'object'}} for i in range(5)]
    codec = RecallDataCodec(store, scope='acme')
    await codec.encode([_json_payload({'step': 1, 'tools': tools})])
    before = await _stored(tmp_path)
    await RecallDataCodec(store, scope='acme').encode([_json_payload({'step': 2, 'tools': tools})])
    added = [body for digest, body in (await _stored(tmp_path)).items() if digest not in before]
    assert added == []  # the root is small once `tools` is a reference: it stays in the payload


async def test_a_payload_already_using_the_reference_keys_stays_inline(store):
    payload = _json_payload({'$recall': 'not ours', 'padding': 'p' * 2_000})
    nested = _json_payload({'items': [{'$recall-items': 'x'}], 'padding': 'p' * 2_000})
    assert await RecallDataCodec(store).encode([payload, nested]) == [payload, nested]


async def test_a_payload_from_the_first_codec_format_still_decodes(store):
    """Histories recorded before whole payloads became bodies carried message references inline."""
    codec = RecallDataCodec(store, scope='acme')
    body = json.dumps({'kind': 'request', 'parts': []}, separators=(',', ':')).encode()
    digest = hashlib.sha256(body).hexdigest()
    await store.put_bodies('acme', {digest: body})
    old = Payload(
        metadata={'encoding': ENCODING, 'temporal-recall-encoding': b'json/plain'},
        data=json.dumps({'messages': [{'$recall': digest}], 'n': 1}).encode(),
    )
    [decoded] = await codec.decode([old])
    assert json.loads(decoded.data) == {'messages': [{'kind': 'request', 'parts': []}], 'n': 1}


async def test_a_tiny_cache_still_decodes_everything(store):
    history = [ModelRequest(parts=[UserPromptPart(f'message {i} ' + 'z' * 300)]) for i in range(100)]
    [encoded] = await RecallDataCodec(store, scope='acme').encode([_payload(history)])
    [decoded] = await RecallDataCodec(store, scope='acme', cache_bytes=1).decode([encoded])
    assert PydanticAIPayloadConverter().from_payloads([decoded], [StepDelta])[0].messages == history


def test_negative_sizes_are_refused():
    with pytest.raises(ValueError, match='threshold_bytes'):
        RecallDataCodec('unused.db', threshold_bytes=-1)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=80) | st.dictionaries(st.text(max_size=8), children, max_size=8),
    max_leaves=400,
)


@settings(
    max_examples=60, suppress_health_check=[*settings().suppress_health_check, HealthCheck.function_scoped_fixture]
)
@given(value=json_values)
async def test_any_json_payload_round_trips(store, value):
    codec = RecallDataCodec(store, scope='acme', threshold_bytes=0, subtree_bytes=16)
    [encoded] = await codec.encode([_json_payload(value)])
    [decoded] = await RecallDataCodec(store, scope='acme').decode([encoded])
    assert json.loads(decoded.data) == value


async def test_a_body_cached_longer_than_the_touch_interval_is_touched_again_when_reused(
    store: SqliteConversationStore, tmp_path: Path
):
    """A worker that keeps a body cached for weeks still references it in new histories: the store must
    hear of that, or `prune_bodies` would delete a body a retained history needs."""
    codec = RecallDataCodec(store, scope='acme')
    await codec.encode([_payload()])
    long_ago = int(time.time()) - 3 * 3600
    with sqlite3.connect(tmp_path / 'bodies.db') as db:
        db.execute('UPDATE message_bodies SET touched_at = ?', (long_ago,))

    def touched() -> set[int]:
        with sqlite3.connect(tmp_path / 'bodies.db') as db:
            return {row[0] for row in db.execute('SELECT touched_at FROM message_bodies')}

    await codec.encode([_payload()])  # cached a moment ago: no store round trip
    assert touched() == {long_ago}
    interval = BODY_TOUCH_INTERVAL.total_seconds()
    codec._stored_at = {digest: at - interval for digest, at in codec._stored_at.items()}  # an interval later
    started = int(time.time())
    await codec.encode([_payload()])
    assert all(started <= stamp <= time.time() for stamp in touched())  # stamped by this encode


async def test_a_json_payload_that_is_not_storable_json_is_refused_naming_it(store):
    good = _payload()
    bad = Payload(metadata={'encoding': b'json/plain'}, data=b'{"text": "\\udc00' + b' ' * 600 + b'"}')
    with pytest.raises(UnencodablePayload, match='Payload 1 is json/plain but not storable JSON') as raised:
        await RecallDataCodec(store, scope='acme').encode([good, bad])
    assert raised.value.index == 1


async def test_a_reference_that_cannot_be_a_hash_is_refused_before_the_store_is_read(tmp_path: Path):
    forged = Payload(
        metadata={'encoding': ENCODING, 'temporal-recall-encoding': b'json/plain'},
        data=json.dumps({'$recall': '\x00' * 64}).encode(),
    )
    codec = RecallDataCodec(str(tmp_path / 'never-opened.db'))
    with pytest.raises(MissingMessageBody, match='is not a message body reference'):
        await codec.decode([forged])
    assert not (tmp_path / 'never-opened.db').exists()
