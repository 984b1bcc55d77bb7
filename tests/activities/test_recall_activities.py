"""The activities' own rules: how much of a long history `load_history(max_bytes=...)` loads."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from temporal_recall.activities._recall_activities import RecallActivities, newest_turns
from temporal_recall.content import content_hash
from temporal_recall.models import HistoryRequest, SearchRequest
from temporal_recall.store import AppendRequest, open_store


def _turn(n: int, words: int) -> list[ModelMessage]:
    """A user turn with a tool call in the middle: a cut inside it would strand a tool return."""
    return [
        ModelRequest(parts=[UserPromptPart(f'turn {n} ' + 'w' * words)]),
        ModelResponse(parts=[ToolCallPart('lookup', {'n': n}, tool_call_id=f'c{n}')]),
        ModelRequest(parts=[ToolReturnPart('lookup', 'x' * words, tool_call_id=f'c{n}')]),
        ModelResponse(parts=[TextPart(f'answer {n}')]),
    ]


def _size(messages: list[ModelMessage]) -> int:
    return len(ModelMessagesTypeAdapter.dump_json(messages))


def test_only_whole_turns_that_fit_are_kept() -> None:
    history = [message for n in range(6) for message in _turn(n, 1_000)]
    one_turn = _size(history[-4:])
    for budget in (one_turn, one_turn * 2 + 50, one_turn * 3 - 1, _size(history)):
        kept = newest_turns(history, budget)
        assert kept % 4 == 0 and kept > 0, 'a window starts at a user prompt'
        assert _size(history[-kept:]) <= budget
        if kept < len(history):
            assert _size(history[-kept - 4 :]) > budget, 'as many whole turns as fit'
    assert newest_turns(history, _size(history)) == len(history)


def test_a_last_turn_larger_than_the_budget_loads_nothing() -> None:
    history = [*_turn(0, 10), *_turn(1, 5_000)]
    assert newest_turns(history, 4_000) == 0


def test_a_window_never_opens_on_a_tool_return() -> None:
    """Deferred tool results sent with the next prompt: that request answers a call the window would cut."""
    history = [
        *_turn(0, 10),
        ModelResponse(parts=[ToolCallPart('approve', {}, tool_call_id='d1')]),
        ModelRequest(parts=[ToolReturnPart('approve', 'yes', tool_call_id='d1'), UserPromptPart('and then? ' * 300)]),
        ModelResponse(parts=[TextPart('done')]),
    ]
    whole = _size(history)
    assert newest_turns(history, whole - 100) == 0, 'the only turn start left would strand its tool return'
    assert newest_turns(history, whole) == len(history)


def test_a_history_that_fits_is_loaded_whole_system_prompt_included() -> None:
    history = [ModelRequest(parts=[SystemPromptPart('be brief')]), *_turn(0, 10)]
    assert newest_turns(history, _size(history)) == len(history)


async def test_a_window_counts_from_the_conversations_start_with_a_limit_too(tmp_path: Path) -> None:
    store = await open_store(tmp_path / 'recall.db')
    history = [message for n in range(5) for message in _turn(n, 10)]
    try:
        await store.append(
            AppendRequest(
                conversation_id='c', scope=None, idempotency_key='k', base_length=0, base_hash=None, messages=history
            )
        )
        activities = RecallActivities(store)
        loaded = await activities.load_history(HistoryRequest(conversation_id='c', limit=8, max_bytes=1_000_000))
        whole = await activities.load_history(HistoryRequest(conversation_id='c', max_bytes=1_000_000))
    finally:
        await store.close()
    assert loaded.messages == history[-8:]
    assert loaded.window is not None and loaded.window.offset == 12, 'twelve stored messages come before it'
    assert loaded.window.base_hash == content_hash(history[11])
    assert whole.messages == history and whole.window is None


async def test_a_branch_past_one_payload_is_refused_whole_and_windowed_within_the_budget(tmp_path: Path) -> None:
    store = await open_store(tmp_path / 'recall.db')
    history = [message for n in range(5) for message in _turn(n, 200_000)]  # about 2 MB
    try:
        await store.append(
            AppendRequest(
                conversation_id='c', scope=None, idempotency_key='k', base_length=0, base_hash=None, messages=history
            )
        )
        activities = RecallActivities(store)
        with pytest.raises(ApplicationError) as refused:
            await activities.load_history(HistoryRequest(conversation_id='c'))
        windowed = await activities.load_history(HistoryRequest(conversation_id='c', max_bytes=1_000_000))
    finally:
        await store.close()
    assert refused.value.type == 'PayloadTooLarge' and refused.value.non_retryable
    assert windowed.messages == history[-8:] and _size(windowed.messages) <= 1_000_000


UNREACHABLE = 'postgresql://postgres@127.0.0.1:9/test'
"""A PostgreSQL store nobody listens for (the discard port): every connection is refused at once."""


@pytest.mark.parametrize('activity_name', ['load_history', 'search'])
async def test_an_unreachable_store_fails_retryably_with_its_own_message_alone(activity_name: str):
    """Temporal keeps an activity's last failure only up to a few KB: with the driver's chain attached, the
    retried failure read "Failure exceeds size limit". It carries the store's message and nothing else."""
    activities = RecallActivities(UNREACHABLE)
    environment = ActivityEnvironment()
    call = (
        environment.run(activities.load_history, HistoryRequest(conversation_id='c'))
        if activity_name == 'load_history'
        else environment.run(activities.search, SearchRequest(query='order', conversation_id='c'))
    )
    with pytest.raises(ApplicationError) as raised:
        await call
    failure = raised.value
    assert failure.type == 'StoreUnavailable' and not failure.non_retryable
    assert failure.message.startswith(f'Cannot reach the PostgreSQL store at {UNREACHABLE}')
    assert failure.__cause__ is None and failure.__suppress_context__
