"""pydantic-ai's own cycle, load → `agent.run(conversation=...)` → `save`, with `ConversationRecall` on the store."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from temporal_recall import ConversationRecall


def _agent(store: Any) -> Agent[None, str]:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(f'reply {len(messages)}')])

    return Agent(
        FunctionModel(respond, model_name='echo'), capabilities=[ConversationRecall(store=store, scope='acme')]
    )


async def _turn(store: Any, agent: Agent[None, str], prompt: str) -> Any:
    conversation = await store.load('c1', scope='acme') or Conversation(conversation_id='c1')
    result = await agent.run(prompt, conversation=conversation)
    entries = await store.save(result, scope='acme')
    return result, entries


async def test_each_turn_saves_without_conflict_and_stores_the_runs_own_messages(any_store: Any):
    agent = _agent(any_store)
    _, first_entries = await _turn(any_store, agent, 'hello')
    second, second_entries = await _turn(any_store, agent, 'again')
    stored = await any_store.load_entries('c1', scope='acme')
    # Every message once, in order, equal to the run's own copy (its run_id and conversation_id included).
    assert [entry.message for entry in stored] == second.all_messages()
    assert all(message.run_id and message.conversation_id == 'c1' for message in second.all_messages())
    assert (await any_store.read_record('c1')).branches == []
    # Each save returns the entries of its turn, which the capability had stored.
    assert [entry.id for entry in [*first_entries, *second_entries]] == [entry.id for entry in stored]
    assert len(first_entries) == len(second_entries) == 2
    # The result carries the new revision, so the conversation continues without a reload.
    third = await agent.run('once more', conversation=second.conversation)
    await any_store.save(third, scope='acme')
    assert [entry.message for entry in await any_store.load_entries('c1', scope='acme')] == third.all_messages()


async def test_a_change_by_anyone_else_while_the_run_went_on_still_conflicts(any_store: Any):
    agent = _agent(any_store)
    await _turn(any_store, agent, 'hello')
    conversation = await any_store.load('c1', scope='acme')
    result = await agent.run('again', conversation=conversation)
    # Another request goes back one turn (an edit in another tab) after this run stored its steps.
    record = await any_store.read_record('c1')
    await any_store.branch('c1', at=2, expected_revision=record.revision, scope='acme')
    with pytest.raises(ConversationConflict):
        await any_store.save(result, scope='acme')


async def test_another_runs_appends_are_a_conflict(any_store: Any):
    agent = _agent(any_store)
    await _turn(any_store, agent, 'hello')
    loaded = await any_store.load('c1', scope='acme')
    mine = await agent.run('mine', conversation=loaded)
    # A second run from the same loaded revision, persisted by its own capability, lands first.
    theirs = await agent.run('theirs', conversation=await any_store.load('c1', scope='acme'))
    await any_store.save(theirs, scope='acme')
    with pytest.raises(ConversationConflict):
        await any_store.save(mine, scope='acme')
