"""A chat client's new turn that sends again the prompts the stored conversation holds unanswered.

A prompt is stored before its model call (`_persisting_model`), so a turn whose call failed leaves it
stored, with no answer. The client still shows it, and one that sends its whole history sends it
again with its next message. pydantic-ai's UI adapters take as the new turn everything the client
holds after its last answer, and a client joins its consecutive user messages into one request, under
the id of the last: so the adapter cannot tell the resent prompt from a new one, and the run would
send it to the model twice. The stored copy is the conversation's: the repeat is dropped from the
new request, as the adapters drop tool results a client sends again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelRequestPart, ModelResponse, UserPromptPart

__all__ = ('without_resent_prompts',)


def without_resent_prompts(messages: Sequence[ModelMessage]) -> list[ModelMessage] | None:
    """`messages` without the prompts their last request repeats from the unanswered requests before it;
    `None` when it repeats none.

    The repeat is the longest run of prompts that ends the unanswered ones and begins the last request.
    """
    answered = max((i for i, message in enumerate(messages) if isinstance(message, ModelResponse)), default=-1)
    *unanswered, last = messages[answered + 1 :] or [None]
    if not unanswered or not isinstance(last, ModelRequest):
        return None
    said = [_said(part) for message in unanswered if isinstance(message, ModelRequest) for part in _prompts(message)]
    again = [_said(part) for part in _prompts(last)]
    repeated = next((n for n in range(min(len(said), len(again)), 0, -1) if said[len(said) - n :] == again[:n]), 0)
    if not repeated:
        return None
    parts: list[ModelRequestPart] = []
    for part in last.parts:
        if repeated and isinstance(part, UserPromptPart):
            repeated -= 1
            continue
        parts.append(part)
    kept = [replace(last, parts=parts)] if parts else []
    return [*messages[: len(messages) - 1], *kept]


def _prompts(request: ModelRequest) -> list[UserPromptPart]:
    return [part for part in request.parts if isinstance(part, UserPromptPart)]


def _said(part: UserPromptPart) -> Any:
    return part.content
