"""A prompt said again right after the stored conversation left it unanswered is sent to the model once.

A prompt is stored when its model call fails (`_step_write`), so a turn whose call failed leaves it
stored with no answer, and the next run continues from it. That run often says it again: a chat client
that sends its whole history still shows it and sends it with its next message (and joins consecutive
user messages into one request, under the id of the last, so pydantic-ai's UI adapters cannot tell it
from a new one), and an application retries a failed turn with the same prompt. The run would send it
to the model twice. The unanswered copy gives way to the one said again: the request saying it again
begins with what the stored request says, so the store holds it once either way (`store/log/_pending.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, UserContent, UserPromptPart

__all__ = ('without_repeated_prompts',)


def without_repeated_prompts(
    messages: Sequence[ModelMessage], prompt: str | Sequence[UserContent] | None
) -> list[ModelMessage] | None:
    """`messages` without the unanswered prompts the run says again; `None` when it says none again.

    The unanswered requests are those after the last response. What the run says again begins its
    `prompt`, or without one, its last request (which the others then are before). The repeat is the
    longest run of prompts that ends the unanswered ones and begins what is said again.
    """
    answered = max((i for i, message in enumerate(messages) if isinstance(message, ModelResponse)), default=-1)
    unanswered = list(messages[answered + 1 :])
    if prompt is not None:
        again = [prompt]
    elif len(unanswered) > 1 and isinstance(last := unanswered.pop(), ModelRequest):
        again = [part.content for part in _prompts(last)]
    else:
        return None
    said = [part for message in unanswered if isinstance(message, ModelRequest) for part in _prompts(message)]
    contents = [part.content for part in said]
    repeated = next((n for n in range(min(len(said), len(again)), 0, -1) if contents[-n:] == again[:n]), 0)
    if not repeated:
        return None
    dropped = {id(part) for part in said[-repeated:]}
    kept: list[ModelMessage] = list(messages[: answered + 1])
    for message in messages[answered + 1 :]:
        if isinstance(message, ModelRequest) and any(id(part) in dropped for part in message.parts):
            parts = [part for part in message.parts if id(part) not in dropped]
            if parts:
                kept.append(replace(message, parts=parts))
            continue
        kept.append(message)
    return kept


def _prompts(request: ModelRequest) -> list[UserPromptPart]:
    return [part for part in request.parts if isinstance(part, UserPromptPart)]
