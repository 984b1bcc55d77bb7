"""`temporal_recall.testing.scripted_model` answers streamed requests too: the chat UI adapters stream."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    ModelResponsePart,
    PartDeltaEvent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)
from pydantic_ai.run import AgentRunResultEvent
from starlette.requests import Request

from temporal_recall.testing import scripted_model, text, tool_call

from .ui._chat import CLIENTS, TENANT_HEADER, asgi_client

CHAT_UI_PAGE = Path(__file__).resolve().parents[1] / 'docs' / 'guides' / 'chat-ui.md'

ANSWER = 'Your order A-1042 left Leith this morning.'


def weather(city: str) -> str:
    """The weather in a city."""
    return f'Sunny in {city}'


def _said(messages: list[ModelMessage]) -> list[tuple[str, ...]]:
    """What each response said, without what differs between a streamed and an unstreamed run (usage, times)."""
    said: list[tuple[str, ...]] = []
    for message in messages:
        if isinstance(message, ModelResponse):
            for part in message.parts:
                if isinstance(part, TextPart):
                    said.append(('text', part.content))
                elif isinstance(part, ToolCallPart):
                    said.append(('call', part.tool_name, part.args_as_json_str(), part.tool_call_id))
    return said


async def test_a_streamed_run_gets_the_same_turns_as_an_unstreamed_one():
    agent = Agent(
        scripted_model(tool_call('weather', {'city': 'Oslo'}), text('It is sunny in Oslo today.')), tools=[weather]
    )
    unstreamed = await agent.run('Weather in Oslo?')
    deltas = 0
    streamed = None
    async with agent.run_stream_events('Weather in Oslo?') as events:
        async for event in events:
            deltas += isinstance(event, PartDeltaEvent)
            if isinstance(event, AgentRunResultEvent):
                streamed = event.result
    assert streamed is not None
    assert (
        _said(streamed.all_messages())
        == _said(unstreamed.all_messages())
        == [
            ('call', 'weather', '{"city":"Oslo"}', 'call-weather'),
            ('text', 'It is sunny in Oslo today.'),
        ]
    )
    assert streamed.output == 'It is sunny in Oslo today.'
    assert deltas == 5  # the answer's six words: the first starts the part, each other one is a delta


UNSTREAMABLE = {
    'thinking': [ThinkingPart('Let me think.'), TextPart('Done.')],
    'two texts': [TextPart('Let me look.'), ToolCallPart('weather', {'city': 'Oslo'}), TextPart('Looking.')],
}
"""Turns a `FunctionModel` stream cannot reproduce: it has no thinking from text, and streams all text into one part."""


@pytest.mark.parametrize('parts', UNSTREAMABLE.values(), ids=list(UNSTREAMABLE))
async def test_a_turn_it_cannot_stream_is_refused_naming_its_parts(parts: list[ModelResponsePart]):
    agent = Agent(scripted_model(ModelResponse(parts=parts), text('Done.')), tools=[weather])
    assert (await agent.run('go')).output == 'Done.'  # unstreamed, the same turn is answered
    kinds = re.escape(str([part.part_kind for part in parts]))
    with pytest.raises(ValueError, match=rf'cannot stream a turn of parts {kinds}.*agent\.run'):
        async with agent.run_stream_events('go') as events:
            async for _ in events:
                pass


def _chat_example() -> str:
    """The chat endpoint of the chat UI guide (its first Python block)."""
    found = re.search(r'```python[^\n]*\n(.*?)```', CHAT_UI_PAGE.read_text(), re.S)
    assert found, 'docs/guides/chat-ui.md lost its chat endpoint example'
    return found.group(1)


def _replaced(source: str, old: str, new: str) -> str:
    assert old in source, f'the chat UI guide example no longer holds {old!r}'
    return source.replace(old, new)


async def _readme_chat_app(store_url: str, protocol: str) -> dict[str, Any]:
    """Run the chat UI guide's example as written, with a scripted model, the test's store and a tenant from a
    header. For AG-UI, its adapter where the guide names Vercel AI's (the guide says it takes the same arguments)."""
    source = _replaced(_chat_example(), "'postgresql://recall@db/recall'", repr(store_url))
    if protocol == 'agui':
        source = _replaced(
            source, 'pydantic_ai.ui.vercel_ai import VercelAIAdapter', 'pydantic_ai.ui.ag_ui import AGUIAdapter'
        )
        source = _replaced(source, 'VercelAIAdapter.dispatch_request', 'AGUIAdapter.dispatch_request')

    def authenticated_tenant(request: Request) -> str:
        return request.headers[TENANT_HEADER]

    model = scripted_model(tool_call('search_conversation_history', {'query': 'order'}), text(ANSWER))
    namespace: dict[str, Any] = {'model': model, 'authenticated_tenant': authenticated_tenant}
    code = compile(source, str(CHAT_UI_PAGE), 'exec', flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    ran = eval(code, namespace)  # a coroutine: the example awaits open_store at the top level
    if ran is not None:
        await ran
    return namespace


@pytest.mark.parametrize('protocol', sorted(CLIENTS))
async def test_the_readme_chat_example_answers_with_a_scripted_model(any_store_url: str, protocol: str):
    example = await _readme_chat_app(any_store_url, protocol)
    store = example['store']
    try:
        async with asgi_client(example['app']) as http:
            chat = CLIENTS[protocol](http, f'readme-{protocol}', 'acme', path='/api/chat')
            turns = [await chat.send('Where is my order?'), await chat.send('And my order now?')]
        for turn in turns:
            assert (turn.status, turn.error, turn.text) == (200, None, ANSWER)
            assert 'search_conversation_history' in turn.tool_outputs
        entries = await store.load_entries(chat.chat_id, scope='acme')
        # Each turn: the prompt, the recall tool's call and return, the answer; stored once, in order.
        assert _said([entry.message for entry in entries]) == 2 * [
            ('call', 'search_conversation_history', '{"query":"order"}', 'call-search_conversation_history'),
            ('text', ANSWER),
        ]
        assert len(entries) == 8
        assert (await store.read_record(chat.chat_id)).branches == []
    finally:
        await store.close()
