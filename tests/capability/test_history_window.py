"""A run whose history was loaded without its oldest turns (`RecallDeps.history_window`), in-process."""

from __future__ import annotations

from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from temporal_recall import ConversationRecall, HistoryWindow, RecallDeps
from temporal_recall.content import content_hash
from temporal_recall.store import AppendRequest, SqliteConversationStore, open_store

HISTORY: list[ModelMessage] = [
    message
    for n in range(3)
    for message in (ModelRequest(parts=[UserPromptPart(f'turn {n}')]), ModelResponse(parts=[TextPart(f'ok {n}')]))
]
WINDOW = HistoryWindow(offset=4, base_hash=content_hash(HISTORY[3]))
"""The last turn loaded: four stored messages before it."""


def _noted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart('noted')])


async def _stored(path: Path) -> SqliteConversationStore:
    store = await open_store(path)
    await store.append(
        AppendRequest(
            conversation_id='c', scope=None, idempotency_key='k', base_length=0, base_hash=None, messages=HISTORY
        )
    )
    return store


def _prompts(messages: list[ModelMessage]) -> list[str]:
    return [str(p.content) for m in messages for p in m.parts if isinstance(p, UserPromptPart)]


async def test_the_runs_messages_follow_the_whole_stored_conversation(tmp_path: Path) -> None:
    store = await _stored(tmp_path / 'recall.db')
    try:
        agent = Agent(FunctionModel(_noted), deps_type=RecallDeps, capabilities=[ConversationRecall(store=store)])
        await agent.run(
            'new turn', message_history=HISTORY[4:], conversation_id='c', deps=RecallDeps(history_window=WINDOW)
        )
        entries = await store.load_entries('c')
        record = await store.read_record('c')
    finally:
        await store.close()
    assert entries is not None and [e.message for e in entries][:6] == HISTORY
    assert _prompts([e.message for e in entries]) == ['turn 0', 'turn 1', 'turn 2', 'new turn']
    assert record is not None and record.branches == []


async def test_a_conversation_that_moved_below_the_window_still_gets_the_run(tmp_path: Path) -> None:
    """Deleted (or rewritten shorter) between loading and writing: the run is stored, not dropped."""
    store = await _stored(tmp_path / 'recall.db')
    try:
        await store.delete('c')
        agent = Agent(FunctionModel(_noted), deps_type=RecallDeps, capabilities=[ConversationRecall(store=store)])
        await agent.run(
            'MY TURN', message_history=HISTORY[4:], conversation_id='c', deps=RecallDeps(history_window=WINDOW)
        )
        entries = await store.load_entries('c')
    finally:
        await store.close()
    assert entries is not None
    assert _prompts([e.message for e in entries]) == ['turn 2', 'MY TURN']
