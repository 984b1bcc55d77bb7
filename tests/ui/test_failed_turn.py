"""A chat turn whose model call failed, then the next turns: the conversation continues from its prompt.

`ConversationRecall` stores a prompt before the model is called, so a turn whose provider answered
503 leaves it stored with no answer after it. The next turn must continue from it, whether the client
sends its whole history (the failed prompt again) or only its new message: the model is sent each
prompt once, and the store holds each message once, in order, without a branch.
"""

from __future__ import annotations

from typing import Any

import pytest

from temporal_recall.content import content_hash

from .._said import user_prompts
from ._chat import CLIENTS, Mode, asgi_client, chat_app
from .agents import Outage, chat_agent

PROTOCOLS = sorted(CLIENTS)
PROMPTS = ('What is the weather in Oslo?', 'And in Madrid?', 'And in Rome?')


@pytest.mark.parametrize('mode', ['full', 'last'])
@pytest.mark.parametrize('protocol', PROTOCOLS)
async def test_the_turn_after_a_failed_model_call_continues_from_its_prompt(any_store: Any, protocol: str, mode: Mode):
    outage = Outage(failures=1)
    async with asgi_client(chat_app(chat_agent(any_store, outage=outage), any_store)) as http:
        chat = CLIENTS[protocol](http, f'failed-{protocol}-{mode}', 'acme', mode=mode)
        failed = await chat.send(PROMPTS[0])
        turns = [await chat.send(prompt) for prompt in PROMPTS[1:]]
    assert failed.status == 200 and failed.error is not None and 'overloaded' in failed.error
    assert [(turn.status, turn.error, turn.text) for turn in turns] == [
        (200, None, f'You said: {prompt}') for prompt in PROMPTS[1:]
    ]
    # The failed prompt reached the model with the next turn, once, in either client mode.
    assert outage.sent == [list(PROMPTS[:1]), list(PROMPTS[:2]), list(PROMPTS)]
    entries = await any_store.load_entries(chat.chat_id, scope='acme')
    messages = [entry.message for entry in entries]
    assert user_prompts(messages) == list(PROMPTS)
    assert [message.kind for message in messages] == ['request', 'request', 'response', 'request', 'response']
    assert len({content_hash(message) for message in messages}) == len(messages)
    assert (await any_store.read_record(chat.chat_id)).branches == []
    assert (await any_store.check()).findings == []
    # The saves told the client of every entry once, the failed turn's prompt with the turn that answered it.
    assert [entry_id for turn in turns for entry_id in turn.saved_entry_ids] == [entry.id for entry in entries]
