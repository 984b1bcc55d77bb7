"""The activities' own rules: how much of a long history `load_history(max_bytes=...)` loads."""

from __future__ import annotations

from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from temporal_recall.activities._recall_activities import newest_turns


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
