"""`without_repeated_prompts`: a prompt said again right after it was left unanswered is sent once."""

from __future__ import annotations

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, SystemPromptPart, TextPart, UserPromptPart

from temporal_recall.capability._repeated_prompts import without_repeated_prompts

OSLO, MADRID, ROME = 'Weather in Oslo?', 'And in Madrid?', 'And in Rome?'
ANSWERED: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart('Hi')]), ModelResponse(parts=[TextPart('Hello.')])]


def said(*texts: str) -> ModelRequest:
    return ModelRequest(parts=[UserPromptPart(text) for text in texts])


def _prompts(messages: list[ModelMessage] | None) -> list[list[str]] | None:
    if messages is None:
        return None
    return [[str(part.content) for part in message.parts if isinstance(part, UserPromptPart)] for message in messages]


def test_a_client_sending_its_whole_history_says_the_unanswered_prompt_once():
    once = without_repeated_prompts([*ANSWERED, said(OSLO), said(OSLO, MADRID)], None)
    assert _prompts(once) == [['Hi'], [], [OSLO, MADRID]]


def test_only_the_prompts_that_end_the_unanswered_ones_and_begin_the_new_request_are_dropped():
    # Two failed turns, stored as one request; the client sends only the last again with a new one.
    once = without_repeated_prompts([*ANSWERED, said(OSLO, MADRID), said(MADRID, ROME)], None)
    assert _prompts(once) == [['Hi'], [], [OSLO], [MADRID, ROME]]


def test_a_new_prompt_or_no_unanswered_one_changes_nothing():
    assert without_repeated_prompts([*ANSWERED, said(OSLO), said(MADRID)], None) is None
    assert without_repeated_prompts([*ANSWERED, said(OSLO)], None) is None
    assert without_repeated_prompts(ANSWERED, OSLO) is None
    assert without_repeated_prompts([*ANSWERED, said(OSLO)], MADRID) is None
    # The same words after an answer are a new turn.
    assert without_repeated_prompts([*ANSWERED, said('Hi')], None) is None


def test_a_run_retrying_the_unanswered_prompt_says_it_once():
    assert _prompts(without_repeated_prompts([*ANSWERED, said(OSLO)], OSLO)) == [['Hi'], []]
    # What else the unanswered request holds stays (the system prompt a first request carries).
    first = ModelRequest(parts=[SystemPromptPart('Be brief.'), UserPromptPart(OSLO)])
    once = without_repeated_prompts([first], OSLO)
    assert once is not None and [type(part).__name__ for message in once for part in message.parts] == [
        'SystemPromptPart'
    ]
