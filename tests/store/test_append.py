"""The delta path (`DeltaWriter.append`) the persistence capability calls at every step boundary."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import count
from pathlib import Path

import pytest
from pydantic_ai import messages as m
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict
from pydantic_ai.usage import RunUsage

from temporal_recall.content import dump_message, load_message
from temporal_recall.errors import HistoryMismatch, MessageNotSerializable, UnknownConversation
from temporal_recall.store import AppendRequest, AppendResult, SqliteConversationStore

from ._support import hex_hash, table_counts, tool_return, turn, user

_keys = count()


def delta(
    messages: list[m.ModelMessage],
    *,
    base: list[m.ModelMessage] | None = None,
    conversation_id: str = 'c',
    scope: str | None = 's',
    key: str | None = None,
    **kwargs: object,
) -> AppendRequest:
    """A delta after `base` (the writer's view of the stored history)."""
    base = base or []
    return AppendRequest(
        conversation_id=conversation_id,
        scope=scope,
        idempotency_key=key if key is not None else f'key-{next(_keys)}',
        base_length=len(base),
        base_hash=hex_hash(base[-1]) if base else None,
        messages=messages,
        **kwargs,  # type: ignore[arg-type]
    )


async def history(store: SqliteConversationStore, conversation_id: str = 'c') -> list[m.ModelMessage]:
    loaded = await store.load(conversation_id)
    assert loaded is not None
    return loaded.messages


async def test_create_and_extend(sqlite_store: SqliteConversationStore) -> None:
    first = await sqlite_store.append(delta(turn(1)))
    assert (first.length, first.stored, first.replayed) == (2, 2, False)
    second = await sqlite_store.append(delta(turn(2), base=turn(1)))
    assert (second.length, second.stored) == (4, 2)
    assert await history(sqlite_store) == [*turn(1), *turn(2)]
    record = await sqlite_store.read_record('c')
    assert record is not None
    assert record.head_id == second.head_id and record.branches == [] and record.scope == 's'


async def test_attaching_behind_the_head_branches(sqlite_store: SqliteConversationStore) -> None:
    await sqlite_store.append(delta([*turn(1), *turn(2)]))
    old_head = (await sqlite_store.read_record('c')).head_id  # type: ignore[union-attr]
    result = await sqlite_store.append(delta([user('different')], base=turn(1)))
    assert (result.length, result.stored) == (3, 1)
    assert await history(sqlite_store) == [*turn(1), user('different')]
    record = await sqlite_store.read_record('c')
    assert record is not None and record.branches == [old_head]
    assert [entry.message for entry in await sqlite_store.read_history(old_head)] == [*turn(1), *turn(2)]


async def test_a_base_the_store_does_not_hold_is_a_mismatch(sqlite_store: SqliteConversationStore) -> None:
    await sqlite_store.append(delta(turn(1)))
    before = await sqlite_store.read_record('c')
    with pytest.raises(HistoryMismatch, match='resend with base_length=0'):
        await sqlite_store.append(delta(turn(2), base=[user('not what was stored')]))
    with pytest.raises(HistoryMismatch):
        await sqlite_store.append(delta(turn(3), base=[*turn(1), *turn(2)]))  # longer than stored
    with pytest.raises(HistoryMismatch):
        await sqlite_store.append(delta(turn(3), base=turn(1), conversation_id='new'))  # nothing stored yet
    assert await sqlite_store.read_record('c') == before
    assert await sqlite_store.read_record('new') is None


async def test_full_resend_stores_only_what_is_missing(sqlite_store: SqliteConversationStore) -> None:
    await sqlite_store.append(delta(turn(1)))
    result = await sqlite_store.append(delta([*turn(1), *turn(2)]))
    assert (result.length, result.stored) == (4, 2)
    again = await sqlite_store.append(delta([*turn(1), *turn(2)]))
    assert (again.length, again.stored) == (4, 0)
    assert await history(sqlite_store) == [*turn(1), *turn(2)]
    assert table_counts(sqlite_store.path)['entries'] == 4


async def test_full_resend_that_diverges_branches_at_the_first_difference(
    sqlite_store: SqliteConversationStore,
) -> None:
    await sqlite_store.append(delta([*turn(1), *turn(2)]))
    old = (await sqlite_store.load_entries('c')) or []
    result = await sqlite_store.append(delta([*turn(1), user('rewritten'), *turn(3)]))
    assert (result.length, result.stored) == (5, 3)
    record = await sqlite_store.read_record('c')
    assert record is not None and record.branches == [old[-1].id]
    entries = await sqlite_store.load_entries('c') or []
    assert [entry.id for entry in entries[:2]] == [entry.id for entry in old[:2]]


async def test_a_shorter_resend_does_not_rewind(sqlite_store: SqliteConversationStore) -> None:
    await sqlite_store.append(delta([*turn(1), *turn(2)]))
    result = await sqlite_store.append(delta(turn(1)))
    assert (result.length, result.stored) == (4, 0)
    record = await sqlite_store.read_record('c')
    assert record is not None and record.branches == []


async def test_retried_delta_after_commit_stores_nothing(sqlite_store: SqliteConversationStore) -> None:
    await sqlite_store.append(delta(turn(1)))
    await sqlite_store.append(delta(turn(2), base=turn(1), key='boundary-2'))
    await sqlite_store.append(delta(turn(3), base=[*turn(1), *turn(2)]))
    # The same delta again under a new key (the key was lost): matched by hash, nothing stored or moved.
    retried = await sqlite_store.append(delta(turn(2), base=turn(1)))
    assert (retried.length, retried.stored) == (6, 0)
    assert await history(sqlite_store) == [*turn(1), *turn(2), *turn(3)]


async def test_reinstantiated_messages_match_by_content(sqlite_store: SqliteConversationStore) -> None:
    await sqlite_store.append(delta(turn(1), run_id='run-1'))
    later = datetime(2030, 1, 1, tzinfo=UTC)
    resent = [
        m.ModelRequest(parts=[m.UserPromptPart('question 1 about the weather please', timestamp=later)], run_id='x'),
        load_message(dump_message(turn(1)[1])),
    ]
    result = await sqlite_store.append(delta([*resent, user('next')]))
    assert (result.length, result.stored) == (3, 1)
    assert (await history(sqlite_store))[:2] == turn(1)  # the stored copies are kept as they were


async def test_idempotency_key_replays_the_recorded_result(sqlite_store: SqliteConversationStore) -> None:
    request = delta(turn(1), key='wf-1/run-1/0', usage=RunUsage(requests=1, input_tokens=5))
    first = await sqlite_store.append(request)
    record = await sqlite_store.read_record('c')
    counts = table_counts(sqlite_store.path)
    replay = await sqlite_store.append(request)
    assert replay == AppendResult(conversation_id='c', head_id=first.head_id, length=2, stored=0, replayed=True)
    # Even a different payload under an applied key changes nothing.
    replay = await sqlite_store.append(delta(turn(7), key='wf-1/run-1/0', usage=RunUsage(requests=9)))
    assert replay.replayed and replay.head_id == first.head_id
    assert await sqlite_store.read_record('c') == record
    assert table_counts(sqlite_store.path) == counts


async def test_usage_is_added_once_per_key(sqlite_store: SqliteConversationStore) -> None:
    one = delta(turn(1), key='k1', usage=RunUsage(requests=1, input_tokens=10, output_tokens=2))
    two = delta(turn(2), base=turn(1), key='k2', usage=RunUsage(requests=1, input_tokens=20, output_tokens=3))
    for request in (one, one, two, two, one):
        await sqlite_store.append(request)
    loaded = await sqlite_store.load('c')
    assert loaded is not None
    assert loaded.usage == RunUsage(requests=2, input_tokens=30, output_tokens=5)


async def test_another_scope_is_an_unknown_conversation(sqlite_store: SqliteConversationStore) -> None:
    await sqlite_store.append(delta(turn(1), scope='alice'))
    record = await sqlite_store.read_record('c')
    for scope in ('bob', None, ''):
        with pytest.raises(UnknownConversation, match="'c' is not in the store"):
            await sqlite_store.append(delta(turn(2), base=turn(1), scope=scope))
    await sqlite_store.append(delta([user('unscoped')], conversation_id='n', scope=None))
    with pytest.raises(UnknownConversation):
        await sqlite_store.append(delta([user('x')], conversation_id='n', scope=''))
    assert await sqlite_store.read_record('c') == record


async def test_replay_of_a_key_does_not_cross_scopes(sqlite_store: SqliteConversationStore) -> None:
    await sqlite_store.append(delta(turn(1), scope='alice', key='k'))
    with pytest.raises(UnknownConversation):
        await sqlite_store.append(delta(turn(1), scope='bob', key='k'))


async def test_create_false_requires_the_conversation(sqlite_store: SqliteConversationStore) -> None:
    with pytest.raises(UnknownConversation):
        await sqlite_store.append(delta(turn(1), create=False))
    assert await sqlite_store.read_record('c') is None
    await sqlite_store.append(delta(turn(1)))
    result = await sqlite_store.append(delta(turn(2), base=turn(1), create=False))
    assert result.length == 4


async def test_unserializable_message_stores_nothing(sqlite_store: SqliteConversationStore) -> None:
    await sqlite_store.append(delta(turn(1)))
    counts = table_counts(sqlite_store.path)
    bad = tool_return('fetch', object(), 'call-1')
    with pytest.raises(MessageNotSerializable, match='JSON-serializable'):
        await sqlite_store.append(delta([user('fine'), bad], base=turn(1)))
    assert table_counts(sqlite_store.path) == counts
    assert await history(sqlite_store) == turn(1)


async def test_appends_interleave_with_conversation_store_saves(sqlite_store: SqliteConversationStore) -> None:
    conversation = Conversation(messages=turn(1), conversation_id='c')
    await sqlite_store.save(conversation, scope='s')
    await sqlite_store.append(delta(turn(2), base=turn(1)))
    conversation.messages.extend(turn(3))
    with pytest.raises(ConversationConflict):  # the append moved the revision on
        await sqlite_store.save(conversation)
    loaded = await sqlite_store.load('c')
    assert loaded is not None and loaded.messages == [*turn(1), *turn(2)]
    loaded.messages.extend(turn(3))
    await sqlite_store.save(loaded)
    result = await sqlite_store.append(delta(turn(4), base=[*turn(1), *turn(2), *turn(3)]))
    assert result.length == 8


async def test_append_without_changes_keeps_the_revision(sqlite_store: SqliteConversationStore) -> None:
    await sqlite_store.append(delta(turn(1)))
    record = await sqlite_store.read_record('c')
    result = await sqlite_store.append(delta(turn(1)))
    assert result.stored == 0
    assert await sqlite_store.read_record('c') == record


async def test_appends_survive_reopening(db_path: Path) -> None:
    async with await SqliteConversationStore.open(db_path) as store:
        await store.append(delta(turn(1), key='k'))
    async with await SqliteConversationStore.open(db_path) as store:
        replay = await store.append(delta(turn(1), key='k'))
        assert replay.replayed
        assert await history(store) == turn(1)


async def test_negative_base_length_is_refused(sqlite_store: SqliteConversationStore) -> None:
    request = AppendRequest(
        conversation_id='c', scope=None, idempotency_key='k', base_length=-1, base_hash=None, messages=turn(1)
    )
    with pytest.raises(HistoryMismatch):
        await sqlite_store.append(request)
