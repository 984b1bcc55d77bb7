"""Every backend behaves like pydantic-ai's `InMemoryConversationStore`, the reference.

Each test runs once per backend in `STORE_FACTORIES` (the `store` fixture); the last tests run the
same scripted session against a backend and the reference side by side and compare what a caller
can observe after every step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai import messages as m
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict, ConversationRecord, ConversationStore
from pydantic_ai.exceptions import UserError
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.tools import DeferredToolRequests
from pydantic_ai.usage import RequestUsage, RunUsage

from ._support import REFERENCE, STORE_FACTORIES, reply, summary, tool_call, tool_return, turn, user


async def saved(store: ConversationStore, messages: list[m.ModelMessage], **kwargs: Any) -> Conversation:
    conversation = Conversation(messages=list(messages), **kwargs)
    await store.save(conversation)
    return conversation


async def ids(store: ConversationStore, conversation_id: str) -> list[str]:
    entries = await store.load_entries(conversation_id)
    assert entries is not None
    return [entry.id for entry in entries]


async def test_save_and_load_round_trip(store: ConversationStore) -> None:
    messages = [
        *turn(1),
        tool_call('lookup', {'city': 'Oslo', 'days': [1, 2]}, 'call-1'),
        tool_return('lookup', {'temperature': -3.5, 'unit': 'C'}, 'call-1'),
        m.ModelResponse(
            parts=[m.ThinkingPart('pondering'), m.TextPart('It is cold in Oslo.')],
            usage=RequestUsage(input_tokens=7, output_tokens=3),
            model_name='test',
        ),
        m.ModelRequest(
            parts=[m.UserPromptPart(['see this', m.BinaryImage(data=b'\x89PNG\r\n', media_type='image/png')])]
        ),
    ]
    conversation = Conversation(messages=messages, usage=RunUsage(requests=2, input_tokens=10, output_tokens=4))
    entries = await store.save(conversation)
    assert [entry.message for entry in entries] == messages
    assert [entry.parent_id for entry in entries] == [None, *(entry.id for entry in entries[:-1])]

    loaded = await store.load(conversation.conversation_id)
    assert loaded is not None
    assert loaded.messages == messages
    assert loaded.usage == conversation.usage
    assert loaded.revision == conversation.revision is not None
    assert loaded.deferred_tool_requests is None
    assert loaded.new_message_index == len(messages)
    assert await ids(store, conversation.conversation_id) == [entry.id for entry in entries]


async def test_load_of_unknown_conversation_is_none(store: ConversationStore) -> None:
    assert await store.load('nope') is None
    assert await store.load_entries('nope') is None
    assert await store.read_record('nope') is None


async def test_second_save_appends_only_new_messages(store: ConversationStore) -> None:
    first = await saved(store, turn(1))
    before = await ids(store, first.conversation_id)
    loaded = await store.load(first.conversation_id)
    assert loaded is not None
    loaded.messages.extend(turn(2))
    entries = await store.save(loaded)
    assert [entry.message for entry in entries] == turn(2)
    after = await ids(store, first.conversation_id)
    assert after[:2] == before and len(after) == 4
    assert entries[0].parent_id == before[-1]
    assert await store.save(loaded) == []  # nothing new


async def test_save_without_index_compares_with_stored_history(store: ConversationStore) -> None:
    first = await saved(store, turn(1))
    resent = Conversation(messages=[*turn(1), *turn(2)], conversation_id=first.conversation_id, revision=first.revision)
    entries = await store.save(resent)
    assert [entry.message for entry in entries] == turn(2)
    record = await store.read_record(first.conversation_id)
    assert record is not None and record.branches == []


async def test_rewritten_history_branches_and_keeps_the_old_one(store: ConversationStore) -> None:
    first = await saved(store, [*turn(1), *turn(2)])
    old = await ids(store, first.conversation_id)
    rewritten = Conversation(
        messages=[*turn(1), summary('they talked about weather'), user('go on')],
        conversation_id=first.conversation_id,
        revision=first.revision,
    )
    entries = await store.save(rewritten)
    assert [entry.message for entry in entries] == [summary('they talked about weather'), user('go on')]
    assert entries[0].parent_id == old[1]
    record = await store.read_record(first.conversation_id)
    assert record is not None and record.branches == [old[-1]]
    assert [entry.message for entry in await store.read_history(old[-1])] == [*turn(1), *turn(2)]
    loaded = await store.load(first.conversation_id)
    assert loaded is not None and loaded.messages == rewritten.messages


async def test_branch_at_and_back_from_entry(store: ConversationStore) -> None:
    first = await saved(store, [*turn(1), *turn(2)])
    old = await ids(store, first.conversation_id)
    branched = await store.branch(first.conversation_id, at=2, expected_revision=first.revision)
    assert branched.messages == turn(1)
    record = await store.read_record(first.conversation_id)
    assert record is not None and record.head_id == old[1] and record.branches == [old[-1]]

    branched.messages.extend(turn(3))
    await store.save(branched)
    back = await store.branch(first.conversation_id, from_entry=old[-1], expected_revision=branched.revision)
    assert back.messages == [*turn(1), *turn(2)]
    record = await store.read_record(first.conversation_id)
    assert record is not None and record.head_id == old[-1]
    assert len(record.branches) == 1 and record.branches[0] != old[-1]

    with pytest.raises(UserError):
        await store.branch(first.conversation_id, at=9, expected_revision=back.revision)
    with pytest.raises(UserError):
        await store.branch(first.conversation_id, from_entry='not-an-entry', expected_revision=back.revision)
    with pytest.raises(UserError):
        await store.branch(first.conversation_id, expected_revision=back.revision)


async def test_fork_shares_entries(store: ConversationStore) -> None:
    source = await saved(store, [*turn(1), *turn(2)], usage=RunUsage(requests=2))
    source_ids = await ids(store, source.conversation_id)

    partial = await store.fork(source.conversation_id, at=2, new_conversation_id='fork-a')
    assert partial.messages == turn(1) and partial.usage == RunUsage()
    assert await ids(store, 'fork-a') == source_ids[:2]
    record = await store.read_record('fork-a')
    assert record is not None
    assert (record.forked_from, record.forked_at, record.scope) == (source.conversation_id, source_ids[1], None)

    whole = await store.fork(source.conversation_id, new_conversation_id='fork-b', scope='elsewhere')
    assert whole.messages == [*turn(1), *turn(2)] and whole.usage == RunUsage(requests=2)
    assert await ids(store, 'fork-b') == source_ids
    assert await store.load('fork-b', scope='elsewhere') is not None

    empty = await store.fork(source.conversation_id, at=0, new_conversation_id='fork-c')
    assert empty.messages == [] and await ids(store, 'fork-c') == []

    partial.messages.extend(turn(9))
    await store.save(partial)
    assert (await ids(store, 'fork-a'))[:2] == source_ids[:2]
    assert await ids(store, source.conversation_id) == source_ids  # the source is unchanged

    with pytest.raises(ConversationConflict):
        await store.fork(source.conversation_id, new_conversation_id='fork-a')
    with pytest.raises(UserError):
        await store.fork('missing')
    with pytest.raises(UserError):
        await store.fork(source.conversation_id, at=1, from_entry=source_ids[0])


async def test_fork_from_an_entry_in_a_branch(store: ConversationStore) -> None:
    source = await saved(store, [*turn(1), *turn(2)])
    old = await ids(store, source.conversation_id)
    await store.branch(source.conversation_id, at=1, expected_revision=source.revision)
    fork = await store.fork(source.conversation_id, from_entry=old[2], new_conversation_id='f')
    assert fork.messages == [*turn(1), turn(2)[0]]
    assert await ids(store, 'f') == old[:3]


async def test_revision_conflicts(store: ConversationStore) -> None:
    first = await saved(store, turn(1))
    a = await store.load(first.conversation_id)
    b = await store.load(first.conversation_id)
    assert a is not None and b is not None
    a.messages.extend(turn(2))
    await store.save(a)
    b.messages.extend(turn(3))
    with pytest.raises(ConversationConflict):
        await store.save(b)
    with pytest.raises(ConversationConflict):
        await store.save(Conversation(messages=turn(4), conversation_id=first.conversation_id))
    with pytest.raises(ConversationConflict):
        await store.branch(first.conversation_id, at=1, expected_revision=first.revision)
    loaded = await store.load(first.conversation_id)
    assert loaded is not None and loaded.messages == [*turn(1), *turn(2)]


async def test_scope_hides_other_scopes(store: ConversationStore) -> None:
    conversation = Conversation(messages=turn(1))
    await store.save(conversation, scope='alice')
    cid = conversation.conversation_id
    assert await store.load(cid, scope='bob') is None
    assert await store.load_entries(cid, scope='bob') is None
    assert await store.load(cid, scope='alice') is not None
    assert await store.load(cid) is not None
    assert await store.list_conversations(scope='bob') == []
    assert [record.conversation_id for record in await store.list_conversations(scope='alice')] == [cid]
    await store.delete(cid, scope='bob')
    assert await store.load(cid) is not None
    conversation.messages.extend(turn(2))
    with pytest.raises(ConversationConflict):
        await store.save(conversation, scope='bob')
    with pytest.raises(UserError):
        await store.branch(cid, at=1, expected_revision=conversation.revision, scope='bob')
    with pytest.raises(UserError):
        await store.fork(cid, source_scope='bob')
    await store.save(conversation)  # defaults to the stored scope
    record = await store.read_record(cid)
    assert record is not None and record.scope == 'alice'
    await store.delete(cid, scope='alice')
    assert await store.load(cid) is None


async def test_empty_scope_is_not_no_scope(store: ConversationStore) -> None:
    await saved(store, turn(1), conversation_id='unscoped')
    await store.save(Conversation(messages=turn(2), conversation_id='empty'), scope='')
    assert [record.conversation_id for record in await store.list_conversations(scope='')] == ['empty']
    assert await store.load('unscoped', scope='') is None


async def test_list_conversations_newest_first_with_limit(store: ConversationStore) -> None:
    for name in ('one', 'two', 'three'):
        await saved(store, turn(1), conversation_id=name)
    listed = await store.list_conversations()
    assert [record.conversation_id for record in listed] == ['three', 'two', 'one']
    assert [record.conversation_id for record in await store.list_conversations(limit=2)] == ['three', 'two']
    assert await store.list_conversations(limit=0) == []
    loaded = await store.load('one')
    assert loaded is not None
    loaded.messages.extend(turn(2))
    await store.save(loaded)
    assert [record.conversation_id for record in await store.list_conversations()] == ['one', 'three', 'two']
    with pytest.raises(UserError):
        await store.list_conversations(limit=-1)


async def test_list_ties_break_in_creation_order(store: ConversationStore) -> None:
    moment = datetime(2025, 1, 1, tzinfo=UTC)
    for name in ('b', 'a', 'c'):
        await store.write_record(
            ConversationRecord(conversation_id=name, head_id=None, updated_at=moment), expected_revision=None
        )
    assert [record.conversation_id for record in await store.list_conversations()] == ['b', 'a', 'c']


async def test_load_limit_returns_the_last_messages(store: ConversationStore) -> None:
    first = await saved(store, [*turn(1), *turn(2), *turn(3)])
    loaded = await store.load(first.conversation_id, limit=3)
    assert loaded is not None and loaded.messages == [*turn(2)[1:], *turn(3)]
    empty = await store.load(first.conversation_id, limit=0)
    assert empty is not None and empty.messages == []
    everything = await store.load(first.conversation_id, limit=100)
    assert everything is not None and len(everything.messages) == 6
    with pytest.raises(UserError):
        await store.load(first.conversation_id, limit=-1)
    with pytest.raises(UserError):
        await store.load_entries(first.conversation_id, limit=-1)
    assert loaded is not None
    loaded.messages.extend(turn(4))
    entries = await store.save(loaded)  # still appends to the whole stored conversation
    assert [entry.message for entry in entries] == turn(4)
    whole = await store.load(first.conversation_id)
    assert whole is not None and len(whole.messages) == 8


async def test_delete_keeps_what_forks_share(store: ConversationStore) -> None:
    source = await saved(store, [*turn(1), *turn(2)])
    source_ids = await ids(store, source.conversation_id)
    await store.fork(source.conversation_id, at=2, new_conversation_id='fork')
    await store.delete(source.conversation_id)
    assert await store.load(source.conversation_id) is None
    fork = await store.load('fork')
    assert fork is not None and fork.messages == turn(1)
    assert await ids(store, 'fork') == source_ids[:2]
    for gone in source_ids[2:]:
        with pytest.raises(LookupError):
            await store.read_entry(gone)
    await store.delete('fork')
    for gone in source_ids:
        with pytest.raises(LookupError):
            await store.read_entry(gone)
    assert await store.list_conversations() == []


async def test_delete_keeps_entries_of_branches(store: ConversationStore) -> None:
    keep = await saved(store, [*turn(1), *turn(2)], conversation_id='keep')
    keep_ids = await ids(store, 'keep')
    await store.branch('keep', at=1, expected_revision=keep.revision)
    await store.fork('keep', from_entry=keep_ids[3], new_conversation_id='other')
    await store.delete('keep')
    assert await ids(store, 'other') == keep_ids


async def test_delete_and_recreate_gets_a_new_revision(store: ConversationStore) -> None:
    first = await saved(store, turn(1), conversation_id='again')
    stale = await store.load('again')
    await store.delete('again')
    second = await saved(store, turn(2), conversation_id='again')
    assert second.revision != first.revision
    assert stale is not None
    stale.messages.extend(turn(3))
    with pytest.raises(ConversationConflict):
        await store.save(stale)


async def test_deferred_tool_requests_round_trip(store: ConversationStore) -> None:
    call = m.ToolCallPart('approve_payment', {'amount': 12}, tool_call_id='pay-1')
    deferred = DeferredToolRequests(approvals=[call], metadata={'pay-1': {'reason': 'large'}})
    conversation = Conversation(
        messages=[user('pay it'), m.ModelResponse(parts=[call])], deferred_tool_requests=deferred
    )
    await store.save(conversation)
    loaded = await store.load(conversation.conversation_id)
    assert loaded is not None and loaded.deferred_tool_requests == deferred


async def test_read_entry_and_history_of_unknown_entries(store: ConversationStore) -> None:
    with pytest.raises(LookupError):
        await store.read_entry('nope')
    with pytest.raises(LookupError):
        await store.read_history('nope')
    assert await store.read_history(None) == []


async def test_write_record_with_a_released_head_conflicts(store: ConversationStore) -> None:
    with pytest.raises(ConversationConflict):
        await store.write_record(ConversationRecord(conversation_id='x', head_id='gone'), expected_revision=None)
    assert await store.read_record('x') is None


async def test_agent_runs_round_trip(store: ConversationStore) -> None:
    agent = Agent(TestModel())

    @agent.tool_plain
    def forecast(city: str) -> str:
        return f'Sunny in {city}'

    result = await agent.run('What is the weather?')
    await store.save(result)
    loaded = await store.load(result.conversation.conversation_id)
    assert loaded is not None and loaded.messages == result.all_messages()
    again = await agent.run('And tomorrow?', conversation=loaded)
    entries = await store.save(again)
    assert [entry.message for entry in entries] == again.new_messages()
    reloaded = await store.load(result.conversation.conversation_id)
    assert reloaded is not None and reloaded.messages == again.all_messages()
    assert reloaded.usage == again.conversation.usage


async def test_function_model_run_with_limit_window(store: ConversationStore) -> None:
    def respond(messages: list[m.ModelMessage], info: AgentInfo) -> m.ModelResponse:
        return m.ModelResponse(parts=[m.TextPart(f'I saw {len(messages)} messages')])

    agent = Agent(FunctionModel(respond))
    first = await agent.run('hello')
    await store.save(first)
    window = await store.load(first.conversation.conversation_id, limit=1)
    assert window is not None
    second = await agent.run('again', conversation=window)
    await store.save(second)
    whole = await store.load(first.conversation.conversation_id)
    assert whole is not None
    assert whole.messages == [*first.all_messages(), *second.new_messages()]


# --- Side by side with the reference --------------------------------------------------------------

Step = Callable[[ConversationStore, dict[str, Conversation]], Awaitable[object]]


async def _observe(store: ConversationStore, names: list[str]) -> dict[str, Any]:
    """What a caller can see, with entry ids replaced by the messages they hold (ids differ per store)."""
    seen: dict[str, Any] = {'listed': [record.conversation_id for record in await store.list_conversations()]}
    for name in names:
        record = await store.read_record(name)
        if record is None:
            seen[name] = None
            continue
        history = await store.load_entries(name)
        assert history is not None
        by_id = {entry.id: index for index, entry in enumerate(history)}
        forked_at = None
        if record.forked_at is not None:
            forked_at = [entry.message for entry in await store.read_history(record.forked_at)]
        seen[name] = {
            'messages': [entry.message for entry in history],
            'parents': [by_id.get(entry.parent_id) if entry.parent_id else None for entry in history],
            'branches': [[entry.message for entry in await store.read_history(tip)] for tip in record.branches],
            'usage': record.usage,
            'scope': record.scope,
            'forked_from': record.forked_from,
            'forked_at': forked_at,
            'deferred': record.deferred_tool_requests,
            'window': (await store.load(name, limit=3) or Conversation()).messages,
        }
    return seen


def _script() -> list[Step]:
    async def create(store: ConversationStore, held: dict[str, Conversation]) -> object:
        held['a'] = Conversation(messages=[*turn(1), *turn(2)], conversation_id='a', usage=RunUsage(requests=2))
        held['b'] = Conversation(messages=turn(1, 'taxes'), conversation_id='b')
        await store.save(held['a'], scope='team')
        return len(await store.save(held['b']))

    async def extend(store: ConversationStore, held: dict[str, Conversation]) -> object:
        held['a'].messages.extend([tool_call('calc', {'x': 1}, 'c1'), tool_return('calc', 2, 'c1'), reply('two')])
        return len(await store.save(held['a']))

    async def rewrite(store: ConversationStore, held: dict[str, Conversation]) -> object:
        held['a'] = Conversation(
            messages=[*turn(1), summary('a summary'), user('continue')],
            conversation_id='a',
            revision=held['a'].revision,
        )
        return len(await store.save(held['a']))

    async def branch(store: ConversationStore, held: dict[str, Conversation]) -> object:
        held['a'] = await store.branch('a', at=1, expected_revision=held['a'].revision, scope='team')
        held['a'].messages.extend(turn(5))
        return len(await store.save(held['a']))

    async def fork(store: ConversationStore, held: dict[str, Conversation]) -> object:
        held['f'] = await store.fork('a', at=2, new_conversation_id='f', scope='other')
        held['g'] = await store.fork('b', new_conversation_id='g')
        held['f'].messages.extend(turn(6))
        return len(await store.save(held['f']))

    async def stale(store: ConversationStore, held: dict[str, Conversation]) -> object:
        copy = dataclasses.replace(held['b'], messages=[*held['b'].messages, user('late')], revision='stale')
        try:
            await store.save(copy)
        except ConversationConflict:
            return 'conflict'
        return 'saved'

    async def branch_back(store: ConversationStore, held: dict[str, Conversation]) -> object:
        record = await store.read_record('a')
        assert record is not None
        tip = record.branches[0]
        held['a'] = await store.branch('a', from_entry=tip, expected_revision=held['a'].revision)
        return len(held['a'].messages)

    async def delete(store: ConversationStore, held: dict[str, Conversation]) -> object:
        await store.delete('a', scope='wrong')
        await store.delete('a')
        return await store.load('f') is not None

    async def resave_loaded(store: ConversationStore, held: dict[str, Conversation]) -> object:
        loaded = await store.load('g')
        assert loaded is not None
        loaded.messages.extend(turn(7, 'taxes'))
        return len(await store.save(loaded))

    return [create, extend, rewrite, branch, fork, stale, branch_back, delete, resave_loaded]


@pytest.mark.parametrize('backend', [name for name in STORE_FACTORIES if name != REFERENCE])
async def test_same_session_same_observations_as_reference(backend: str, tmp_path: Path) -> None:
    names = ['a', 'b', 'f', 'g']
    observed: dict[str, list[tuple[object, dict[str, Any]]]] = {}
    for name in (REFERENCE, backend):
        folder = tmp_path / name
        folder.mkdir()
        held: dict[str, Conversation] = {}
        async with STORE_FACTORIES[name](folder) as store:
            observed[name] = [(await step(store, held), await _observe(store, names)) for step in _script()]
    for index, (reference, candidate) in enumerate(zip(observed[REFERENCE], observed[backend], strict=True)):
        assert candidate == reference, f'step {index} ({_script()[index].__name__}) differs'
