"""Recall finds what a conversation said, whatever the model's context kept: after a compaction, a history
window, and runs started without history, through the Python API and the model's own tool, on both backends
(issue 39's table; the same situations through Temporal are in `tests/workflows/test_recall_reach.py`)."""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from temporal_recall import ConversationRecall, search_messages

from .._compaction import SUMMARY as COMPACTION_SUMMARY
from .._compaction import SummarizeEarlierTurns

SUMMARY = 'Summary of previous conversation:\n\nThe user shared a passphrase.'


def recall_or_note(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A model that searches its conversation when asked to `recall …`, reports what the tool returned,
    and otherwise acknowledges the prompt."""
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    returns = [part for part in last.parts if isinstance(part, ToolReturnPart)]
    if returns:
        return ModelResponse(parts=[TextPart(f'found: {returns[0].model_response_str()}')])
    prompt = next(str(part.content) for part in reversed(last.parts) if isinstance(part, UserPromptPart))
    if prompt.startswith('recall '):
        query = prompt.removeprefix('recall ')
        return ModelResponse(parts=[ToolCallPart('search_conversation_history', {'query': query}, tool_call_id='r')])
    return ModelResponse(parts=[TextPart(f'noted: {prompt}')])


def agent_on(store: Any, *capabilities: Any) -> Agent[None, str]:
    return Agent(
        FunctionModel(recall_or_note, model_name='recaller'),
        capabilities=[*capabilities, ConversationRecall(store=store, scope='acme')],
    )


async def said(store: Any, query: str) -> list[str]:
    """The excerpts of a default search of conversation `c` for `query`."""
    result = await search_messages(store, query, conversation_id='c', scope='acme')
    return [hit.excerpt for hit in result.hits]


async def tool_finds(agent: Agent[None, str], query: str, history: list[ModelMessage] | None = None) -> str:
    """What the model's recall tool answered in a run of conversation `c` that asks for `query`."""
    result = await agent.run(f'recall {query}', message_history=history, conversation_id='c')
    return result.output


async def test_text_a_compaction_replaced_is_found(any_store: Any) -> None:
    agent = agent_on(any_store)
    await agent.run('the ZEBRA-93 passphrase is 42', conversation_id='c')
    compacted: list[ModelMessage] = [ModelRequest(parts=[CompactionPart(content='The user shared a passphrase.')])]
    await agent.run('what did I share?', message_history=compacted, conversation_id='c')
    assert await said(any_store, 'ZEBRA-93') == [
        'the ZEBRA-93 passphrase is 42',
        'noted: the ZEBRA-93 passphrase is 42',
    ]
    # The summary itself is never a hit: the messages it summarises are.
    assert await said(any_store, 'shared') == []
    assert 'the ZEBRA-93 passphrase is 42' in await tool_finds(agent, 'ZEBRA-93', compacted)


async def test_text_the_harness_summary_shape_replaced_is_found(any_store: Any) -> None:
    agent = agent_on(any_store)
    await agent.run('the ZEBRA-93 passphrase is 42', conversation_id='c')
    summarised: list[ModelMessage] = [ModelRequest(parts=[SystemPromptPart(SUMMARY)])]
    await agent.run('what did I share?', message_history=summarised, conversation_id='c')
    assert await said(any_store, 'ZEBRA-93') == [
        'the ZEBRA-93 passphrase is 42',
        'noted: the ZEBRA-93 passphrase is 42',
    ]
    assert 'the ZEBRA-93 passphrase is 42' in await tool_finds(agent, 'ZEBRA-93', summarised)


async def test_turns_a_history_window_left_behind_are_found(any_store: Any) -> None:
    """pydantic-ai's `ProcessHistory` keeping the last 3 messages; each run carries the previous one's history."""
    agent = agent_on(any_store, ProcessHistory(lambda messages: messages[-3:]))
    history: list[ModelMessage] = []
    for word in ('apricot', 'blueberry', 'cherry'):
        result = await agent.run(f'I like {word}', message_history=history, conversation_id='c')
        history = result.all_messages()
    record = await any_store.read_record('c')
    # Each window ended where the stored conversation does, so each run continued it (its attach point
    # is found at the end of the history, `store/log/_pending.py`): every turn is on the head.
    assert record is not None and record.branches == []
    for word in ('apricot', 'blueberry', 'cherry'):
        assert await said(any_store, word) == [f'I like {word}', f'noted: I like {word}']
    assert 'I like apricot' in await tool_finds(agent, 'apricot', history)


async def test_runs_started_without_history_are_all_found(any_store: Any) -> None:
    agent = agent_on(any_store)
    for prompt in ('Grüße aus München', '東京タワーは赤い', 'the parcel went to Berlin', 'keep answers brief'):
        await agent.run(prompt, conversation_id='c')
    assert await said(any_store, 'München') == ['Grüße aus München', 'noted: Grüße aus München']
    assert await said(any_store, '東京タワー') == ['東京タワーは赤い', 'noted: 東京タワーは赤い']
    assert await said(any_store, 'Berlin') == ['the parcel went to Berlin', 'noted: the parcel went to Berlin']
    assert 'Grüße aus München' in await tool_finds(agent, 'München')
    report = await any_store.check()
    assert report.clean, report.findings


def _noting(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """`recall_or_note`, acknowledging a request that carries no prompt (one a compaction left as it was)."""
    last = messages[-1]
    has_prompt = isinstance(last, ModelRequest) and any(
        isinstance(p, UserPromptPart | ToolReturnPart) for p in last.parts
    )
    return recall_or_note(messages, info) if has_prompt else ModelResponse(parts=[TextPart('noted')])


async def test_text_core_compaction_dropped_is_found(any_store: Any) -> None:
    """pydantic-ai's own compaction (a `compact_history` capability the run asks for past 4 messages)
    replaces the earlier turns in the run's history with a summary; the store keeps what it replaced."""
    agent = Agent(
        FunctionModel(_noting, model_name='recaller'),
        capabilities=[SummarizeEarlierTurns(threshold=4), ConversationRecall(store=any_store, scope='acme')],
    )
    history: list[ModelMessage] = []
    for prompt in ('the ZEBRA-93 passphrase is 42', 'order B-7 ships Friday', 'I live in Lyon'):
        result = await agent.run(prompt, message_history=history, conversation_id='c')
        history = result.all_messages()
    compacted = [part for message in history for part in message.parts if isinstance(part, CompactionPart)]
    assert [part.content for part in compacted] == [COMPACTION_SUMMARY]
    assert not any('ZEBRA-93' in str(part) for message in history for part in message.parts)
    assert await said(any_store, 'ZEBRA-93') == [
        'the ZEBRA-93 passphrase is 42',
        'noted: the ZEBRA-93 passphrase is 42',
    ]
    # The summary is stored, never a hit: the messages it stands for are.
    assert await said(any_store, 'earlier orders') == []
    assert 'the ZEBRA-93 passphrase is 42' in await tool_finds(agent, 'ZEBRA-93', history)
    report = await any_store.check()
    assert report.clean, report.findings
