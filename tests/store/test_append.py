"""The delta path (`DeltaWriter.append`) the persistence capability calls at every step boundary, on every backend."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import count

import pytest
from pydantic_ai import messages as m
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict
from pydantic_ai.usage import RunUsage

from temporal_recall.content import dump_message, load_message
from temporal_recall.errors import HistoryMismatch, MessageNotSerializable, UnknownConversation
from temporal_recall.store import AppendRequest, AppendResult, PostgresConversationStore
from temporal_recall.store.postgres._dialect import POSTGRESQL

from ._support import AnyStore, Site, hex_hash, row_counts, tool_return, turn, user

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


async def history(store: AnyStore, conversation_id: str = 'c') -> list[m.ModelMessage]:
    loaded = await store.load(conversation_id)
    assert loaded is not None
    return loaded.messages


async def test_create_and_extend(recall_store: AnyStore) -> None:
    first = await recall_store.append(delta(turn(1)))
    assert (first.length, first.stored, first.replayed) == (2, 2, False)
    second = await recall_store.append(delta(turn(2), base=turn(1)))
    assert (second.length, second.stored) == (4, 2)
    assert await history(recall_store) == [*turn(1), *turn(2)]
    record = await recall_store.read_record('c')
    assert record is not None
    assert record.head_id == second.head_id and record.branches == [] and record.scope == 's'


async def test_attaching_behind_the_head_branches(recall_store: AnyStore) -> None:
    await recall_store.append(delta([*turn(1), *turn(2)]))
    old_head = (await recall_store.read_record('c')).head_id  # type: ignore[union-attr]
    result = await recall_store.append(delta([user('different')], base=turn(1)))
    assert (result.length, result.stored) == (3, 1)
    assert await history(recall_store) == [*turn(1), user('different')]
    record = await recall_store.read_record('c')
    assert record is not None and record.branches == [old_head]
    assert [entry.message for entry in await recall_store.read_history(old_head)] == [*turn(1), *turn(2)]


async def test_a_base_the_store_does_not_hold_is_a_mismatch(recall_store: AnyStore) -> None:
    await recall_store.append(delta(turn(1)))
    before = await recall_store.read_record('c')
    with pytest.raises(HistoryMismatch, match='resend with base_length=0'):
        await recall_store.append(delta(turn(2), base=[user('not what was stored')]))
    with pytest.raises(HistoryMismatch):
        await recall_store.append(delta(turn(3), base=[*turn(1), *turn(2)]))  # longer than stored
    with pytest.raises(HistoryMismatch):
        await recall_store.append(delta(turn(3), base=turn(1), conversation_id='new'))  # nothing stored yet
    assert await recall_store.read_record('c') == before
    assert await recall_store.read_record('new') is None


async def test_full_resend_stores_only_what_is_missing(recall_store: AnyStore) -> None:
    await recall_store.append(delta(turn(1)))
    result = await recall_store.append(delta([*turn(1), *turn(2)]))
    assert (result.length, result.stored) == (4, 2)
    again = await recall_store.append(delta([*turn(1), *turn(2)]))
    assert (again.length, again.stored) == (4, 0)
    assert await history(recall_store) == [*turn(1), *turn(2)]
    assert (await row_counts(recall_store))['entries'] == 4


async def test_full_resend_that_diverges_branches_at_the_first_difference(
    recall_store: AnyStore,
) -> None:
    await recall_store.append(delta([*turn(1), *turn(2)]))
    old = (await recall_store.load_entries('c')) or []
    result = await recall_store.append(delta([*turn(1), user('rewritten'), *turn(3)]))
    assert (result.length, result.stored) == (5, 3)
    record = await recall_store.read_record('c')
    assert record is not None and record.branches == [old[-1].id]
    entries = await recall_store.load_entries('c') or []
    assert [entry.id for entry in entries[:2]] == [entry.id for entry in old[:2]]


async def test_a_shorter_resend_does_not_rewind(recall_store: AnyStore) -> None:
    await recall_store.append(delta([*turn(1), *turn(2)]))
    result = await recall_store.append(delta(turn(1)))
    assert (result.length, result.stored) == (4, 0)
    record = await recall_store.read_record('c')
    assert record is not None and record.branches == []


async def test_retried_delta_after_commit_stores_nothing(recall_store: AnyStore) -> None:
    await recall_store.append(delta(turn(1)))
    await recall_store.append(delta(turn(2), base=turn(1), key='boundary-2'))
    await recall_store.append(delta(turn(3), base=[*turn(1), *turn(2)]))
    # The same delta again under a new key (the key was lost): matched by hash, nothing stored or moved.
    retried = await recall_store.append(delta(turn(2), base=turn(1)))
    assert (retried.length, retried.stored) == (6, 0)
    assert await history(recall_store) == [*turn(1), *turn(2), *turn(3)]


async def test_reinstantiated_messages_match_by_content(recall_store: AnyStore) -> None:
    await recall_store.append(delta(turn(1), run_id='run-1'))
    later = datetime(2030, 1, 1, tzinfo=UTC)
    resent = [
        m.ModelRequest(parts=[m.UserPromptPart('question 1 about the weather please', timestamp=later)], run_id='x'),
        load_message(dump_message(turn(1)[1])),
    ]
    result = await recall_store.append(delta([*resent, user('next')]))
    assert (result.length, result.stored) == (3, 1)
    assert (await history(recall_store))[:2] == turn(1)  # the stored copies are kept as they were


async def test_idempotency_key_replays_the_recorded_result(recall_store: AnyStore) -> None:
    request = delta(turn(1), key='wf-1/run-1/0', usage=RunUsage(requests=1, input_tokens=5))
    first = await recall_store.append(request)
    record = await recall_store.read_record('c')
    counts = await row_counts(recall_store)
    replay = await recall_store.append(request)
    assert replay == AppendResult(conversation_id='c', head_id=first.head_id, length=2, stored=0, replayed=True)
    # Even a different payload under an applied key changes nothing.
    replay = await recall_store.append(delta(turn(7), key='wf-1/run-1/0', usage=RunUsage(requests=9)))
    assert replay.replayed and replay.head_id == first.head_id
    assert await recall_store.read_record('c') == record
    assert await row_counts(recall_store) == counts


async def test_usage_is_added_once_per_key(recall_store: AnyStore) -> None:
    one = delta(turn(1), key='k1', usage=RunUsage(requests=1, input_tokens=10, output_tokens=2))
    two = delta(turn(2), base=turn(1), key='k2', usage=RunUsage(requests=1, input_tokens=20, output_tokens=3))
    for request in (one, one, two, two, one):
        await recall_store.append(request)
    loaded = await recall_store.load('c')
    assert loaded is not None
    assert loaded.usage == RunUsage(requests=2, input_tokens=30, output_tokens=5)


async def test_another_scope_is_an_unknown_conversation(recall_store: AnyStore) -> None:
    await recall_store.append(delta(turn(1), scope='alice'))
    record = await recall_store.read_record('c')
    for scope in ('bob', None, ''):
        with pytest.raises(UnknownConversation, match="'c' is not in the store"):
            await recall_store.append(delta(turn(2), base=turn(1), scope=scope))
    await recall_store.append(delta([user('unscoped')], conversation_id='n', scope=None))
    with pytest.raises(UnknownConversation):
        await recall_store.append(delta([user('x')], conversation_id='n', scope=''))
    assert await recall_store.read_record('c') == record


async def test_replay_of_a_key_does_not_cross_scopes(recall_store: AnyStore) -> None:
    await recall_store.append(delta(turn(1), scope='alice', key='k'))
    with pytest.raises(UnknownConversation):
        await recall_store.append(delta(turn(1), scope='bob', key='k'))


async def test_create_false_requires_the_conversation(recall_store: AnyStore) -> None:
    with pytest.raises(UnknownConversation):
        await recall_store.append(delta(turn(1), create=False))
    assert await recall_store.read_record('c') is None
    await recall_store.append(delta(turn(1)))
    result = await recall_store.append(delta(turn(2), base=turn(1), create=False))
    assert result.length == 4


async def test_unserializable_message_stores_nothing(recall_store: AnyStore) -> None:
    await recall_store.append(delta(turn(1)))
    counts = await row_counts(recall_store)
    bad = tool_return('fetch', object(), 'call-1')
    with pytest.raises(MessageNotSerializable, match='JSON-serializable'):
        await recall_store.append(delta([user('fine'), bad], base=turn(1)))
    assert await row_counts(recall_store) == counts
    assert await history(recall_store) == turn(1)


async def test_appends_interleave_with_conversation_store_saves(recall_store: AnyStore) -> None:
    conversation = Conversation(messages=turn(1), conversation_id='c')
    await recall_store.save(conversation, scope='s')
    await recall_store.append(delta(turn(2), base=turn(1)))
    conversation.messages.extend(turn(3))
    with pytest.raises(ConversationConflict):  # the append moved the revision on
        await recall_store.save(conversation)
    loaded = await recall_store.load('c')
    assert loaded is not None and loaded.messages == [*turn(1), *turn(2)]
    loaded.messages.extend(turn(3))
    await recall_store.save(loaded)
    result = await recall_store.append(delta(turn(4), base=[*turn(1), *turn(2), *turn(3)]))
    assert result.length == 8


async def test_append_without_changes_keeps_the_revision(recall_store: AnyStore) -> None:
    await recall_store.append(delta(turn(1)))
    record = await recall_store.read_record('c')
    result = await recall_store.append(delta(turn(1)))
    assert result.stored == 0
    assert await recall_store.read_record('c') == record


async def test_appends_survive_reopening(site: Site) -> None:
    async with await site.open() as store:
        await store.append(delta(turn(1), key='k'))
    async with await site.open() as store:
        replay = await store.append(delta(turn(1), key='k'))
        assert replay.replayed
        assert await history(store) == turn(1)


async def test_negative_base_length_is_refused(recall_store: AnyStore) -> None:
    request = AppendRequest(
        conversation_id='c', scope=None, idempotency_key='k', base_length=-1, base_hash=None, messages=turn(1)
    )
    with pytest.raises(HistoryMismatch):
        await recall_store.append(request)


async def test_given_content_hashes_are_used_instead_of_serialising_again(
    recall_store: AnyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from temporal_recall.store.index import _terms

    hashes = [hex_hash(message) for message in turn(1)]

    def no_second_serialisation(message: m.ModelMessage) -> str:
        raise AssertionError('the store hashed a message whose hash it was given')

    monkeypatch.setattr(_terms, 'content_hash', no_second_serialisation)
    first = await recall_store.append(delta(turn(1), content_hashes=hashes))
    assert (first.length, first.stored) == (2, 2)
    monkeypatch.undo()
    # Filed under those hashes: a delta after them attaches, and the same messages resent store nothing.
    assert (await recall_store.append(delta(turn(2), base=turn(1)))).length == 4
    assert (await recall_store.append(delta([*turn(1), *turn(2)]))).stored == 0
    assert await history(recall_store) == [*turn(1), *turn(2)]


async def test_content_hashes_that_do_not_match_the_messages_one_for_one_are_refused(
    recall_store: AnyStore,
) -> None:
    counts = await row_counts(recall_store)
    with pytest.raises(ValueError, match='holds 1 hashes for 2 messages'):
        await recall_store.append(delta(turn(1), content_hashes=[hex_hash(turn(1)[0])]))
    assert await row_counts(recall_store) == counts


async def test_a_step_updates_its_conversation_in_one_statement(
    recall_store: AnyStore, statements: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step's last writes (its head's move, its postings' segment, its membership and the counters) read
    nothing of each other, so the conversation's row is updated once, and where arrays bind they are one
    statement: a round trip each cost a PostgreSQL step a tenth of its client CPU (issue 42). (The general
    append's shape: a plain step on PostgreSQL is one call, tests/store/test_one_call.py.)"""
    monkeypatch.setattr(POSTGRESQL, 'appends_in_one_call', False)
    await recall_store.append(delta(turn(1)))
    statements.clear()
    result = await recall_store.append(delta(turn(2), base=turn(1)))
    assert result.stored == 2
    updates = [sql for sql in statements if 'UPDATE conversations' in sql]
    assert len(updates) == 1, updates
    if isinstance(recall_store, PostgresConversationStore):  # where arrays bind
        [last] = [sql for sql in statements if 'INSERT INTO applied_writes' in sql]
        for table in ('pending_postings', 'index_segments', 'conversation_documents'):
            assert f'INSERT INTO {table}' in last
        assert last is updates[0]
    assert await history(recall_store) == [*turn(1), *turn(2)]
    record = await recall_store.read_record('c')
    assert record is not None and record.head_id == result.head_id
