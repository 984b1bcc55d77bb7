"""Behind a chat UI: pydantic-ai's Vercel AI and AG-UI adapters and `ConversationRecall` on one store.

Four turns through a FastAPI app over httpx's ASGI transport, streamed, with each protocol's client
sending its whole history or only its new message: every message is stored once, in order, without
a branch, and no turn ends in an error; the recall tool finds turn 1 on turn 4; another tenant sees
nothing; a real concurrent change still gets the adapter's conflict message.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai.messages import ModelRequest, ModelResponse

from temporal_recall.content import content_hash

from ._chat import CLIENTS, Chat, Mode, Turn, asgi_client, chat_app
from .agents import ORDER_QUESTION, RACE_PROMPT, chat_agent

PROTOCOLS = sorted(CLIENTS)
TURNS = (ORDER_QUESTION, 'Thanks!', 'Anything else I should know?', 'recall A-1001')
CONFLICT = (
    'The conversation was changed by another request while this one ran, so this turn was not saved. '
    'Reload the conversation from the server and try again.'
)
"""What the adapters answer a turn whose save conflicts (pydantic-ai's `ui/_adapter.py`)."""


async def _talk(chat: Chat, prompts: tuple[str, ...] = TURNS) -> list[Turn]:
    turns: list[Turn] = []
    for prompt in prompts:
        turn = await chat.send(prompt)
        assert (turn.status, turn.error) == (200, None), prompt
        turns.append(turn)
    return turns


async def _assert_stored_once_in_order(store: Any, chat_id: str, prompts: tuple[str, ...] = TURNS) -> list[Any]:
    """The conversation holds each message once, the prompts in order, no branch, and the run's own ids."""
    entries = await store.load_entries(chat_id, scope='acme')
    messages = [entry.message for entry in entries]
    asked = [
        part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if part.part_kind == 'user-prompt'
    ]
    assert asked == list(prompts)
    # Turns 1 and 4 call a tool (4 messages each), turns 2 and 3 answer (2 each).
    assert len(messages) == 12
    assert len({content_hash(message) for message in messages}) == len(messages)
    record = await store.read_record(chat_id)
    assert record.branches == []
    assert all(message.run_id and message.conversation_id == chat_id for message in messages)
    assert (await store.check()).findings == []
    return entries


@pytest.mark.parametrize('mode', ['full', 'last'])
@pytest.mark.parametrize('protocol', PROTOCOLS)
async def test_four_turns_with_the_store_behind_the_adapter(any_store: Any, protocol: str, mode: Mode):
    async with asgi_client(chat_app(chat_agent(any_store), any_store)) as http:
        chat = CLIENTS[protocol](http, f'chat-{protocol}-{mode}', 'acme', mode=mode)
        turns = await _talk(chat)
    entries = await _assert_stored_once_in_order(any_store, chat.chat_id)
    # Each save told the client the ids of its turn's entries, though the capability stored them.
    assert [entry_id for turn in turns for entry_id in turn.saved_entry_ids] == [entry.id for entry in entries]
    # Turn 4's recall search found turn 1, which the model was not re-sent in `last` mode by the client.
    assert ORDER_QUESTION in turns[3].tool_outputs['search_conversation_history']
    assert 'shipped from Lyon' in turns[3].text
    # The record's usage is the runs' usage, counted once.
    record = await any_store.read_record(chat.chat_id)
    responses = [entry.message for entry in entries if isinstance(entry.message, ModelResponse)]
    assert record.usage.requests == len(responses) == 6


@pytest.mark.parametrize('mode', ['full', 'last'])
@pytest.mark.parametrize('protocol', PROTOCOLS)
async def test_an_edited_turn_replaces_the_stored_one_on_a_branch(any_store: Any, protocol: str, mode: Mode):
    async with asgi_client(chat_app(chat_agent(any_store), any_store)) as http:
        chat = CLIENTS[protocol](http, f'edit-{protocol}-{mode}', 'acme', mode=mode)
        await _talk(chat, TURNS[:2])
        edited = await chat.edit_last('Thanks a lot!')
    assert (edited.status, edited.error) == (200, None)
    messages = [entry.message for entry in await any_store.load_entries(chat.chat_id, scope='acme')]
    assert [type(message).__name__ for message in messages] == ['ModelRequest', 'ModelResponse'] * 3
    assert [part.content for part in messages[4].parts if part.part_kind == 'user-prompt'] == ['Thanks a lot!']
    record = await any_store.read_record(chat.chat_id)
    assert len(record.branches) == 1
    left = [entry.message for entry in await any_store.read_history(record.branches[0])]
    assert [part.content for part in left[4].parts if part.part_kind == 'user-prompt'] == ['Thanks!']
    # The client was told the entries of the edited turn.
    assert edited.saved_entry_ids == [entry.id for entry in (await any_store.load_entries(chat.chat_id))[4:]]


@pytest.mark.parametrize('protocol', PROTOCOLS)
async def test_another_tenant_sees_nothing(any_store: Any, protocol: str):
    async with asgi_client(chat_app(chat_agent(any_store), any_store)) as http:
        await _talk(CLIENTS[protocol](http, 'acme-chat', 'acme'), TURNS[:1])
        before = await any_store.read_record('acme-chat')
        intruder = await CLIENTS[protocol](http, 'acme-chat', 'globex').send('recall A-1001')
        own = await CLIENTS[protocol](http, 'globex-chat', 'globex').send('recall A-1001')
    assert intruder.status == 404
    assert (await any_store.read_record('acme-chat')).revision == before.revision
    assert await any_store.load('acme-chat', scope='globex') is None
    assert (own.status, own.error) == (200, None)
    found = own.tool_outputs['search_conversation_history']
    assert found.startswith('No earlier messages matched "A-1001"')
    assert ORDER_QUESTION not in found and 'shipped' not in found


@pytest.mark.parametrize('protocol', PROTOCOLS)
async def test_a_real_concurrent_change_still_conflicts(any_store: Any, protocol: str):
    tabs: dict[str, Chat] = {}

    async def other_tab_sends() -> None:
        other = await tabs['other'].send('Sent from another tab')
        assert (other.status, other.error) == (200, None)

    async with asgi_client(chat_app(chat_agent(any_store, race=other_tab_sends), any_store)) as http:
        tabs['this'] = CLIENTS[protocol](http, 'shared', 'acme')
        tabs['other'] = CLIENTS[protocol](http, 'shared', 'acme', mode='last')
        await _talk(tabs['this'], TURNS[:2])
        raced = await tabs['this'].send(RACE_PROMPT)
    assert raced.status == 200
    assert raced.error == CONFLICT
    # Both turns are stored (the capability wrote this one as it ran); neither was lost.
    record = await any_store.read_record('shared')
    held = [entry.message for tip in [record.head_id, *record.branches] for entry in await any_store.read_history(tip)]
    said = {part.content for message in held if isinstance(message, ModelRequest) for part in message.parts}
    assert {RACE_PROMPT, 'Sent from another tab'} <= said


@pytest.mark.parametrize('protocol', PROTOCOLS)
async def test_a_client_held_history_attaches_and_an_edit_branches(any_store: Any, protocol: str):
    # No store behind the adapter: the client keeps the history, `ConversationRecall` alone persists.
    async with asgi_client(chat_app(chat_agent(any_store), None)) as http:
        chat = CLIENTS[protocol](http, f'held-{protocol}', 'acme')
        await _talk(chat)
        await _assert_stored_once_in_order(any_store, chat.chat_id)
        chat.drop_last_turn()
        await _talk(chat, ('recall Lyon',))
    record = await any_store.read_record(chat.chat_id)
    assert len(record.branches) == 1
    edited = [entry.message for entry in await any_store.load_entries(chat.chat_id, scope='acme')]
    assert len(edited) == 12
    assert [part.content for part in edited[8].parts if part.part_kind == 'user-prompt'] == ['recall Lyon']
