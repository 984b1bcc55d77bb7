"""What the user said in a list of messages: shared by the tests that check what a model was sent or a store holds."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart


def user_prompts(messages: Sequence[ModelMessage]) -> list[str]:
    """The user prompts of `messages`, in order, as text."""
    return [
        str(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart)
    ]
