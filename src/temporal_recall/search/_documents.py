"""Which words of a message are searchable.

A document is the searchable text of one message. It covers what a person would expect to find
again: user prompts, assistant text, tool calls with their arguments, tool returns, retry feedback
and system prompts. It leaves out what is not conversation (thinking, images and other binary
content, instruction bookkeeping) and the summaries a compaction wrote: the messages a summary
replaced stay in the store and stay findable, and indexing the summary would make every recall hit
it twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pydantic_ai import messages as m

__all__ = ('RECALL_TOOL_NAME', 'is_summary', 'message_role', 'searchable_text', 'transcript_text')

RECALL_TOOL_NAME = 'search_conversation_history'
"""The model's recall tool. Its returns quote other messages, so they are stored but not indexed:
indexing them would make every later search find the same words again in the quote."""


def _text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ''
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _user_content_text(content: str | Iterable[Any]) -> Iterable[str]:
    if isinstance(content, str):
        yield content
        return
    for item in content:
        if isinstance(item, str):
            yield item
        elif isinstance(item, m.TextContent):
            yield item.content


def _part_texts(part: Any, *, indexed: bool = True) -> Iterable[str]:
    if isinstance(part, m.CompactionPart):
        if not indexed and isinstance(part.content, str):
            yield part.content
        return
    if isinstance(part, m.SystemPromptPart | m.TextPart):
        yield part.content
    elif isinstance(part, m.UserPromptPart):
        yield from _user_content_text(part.content)
    elif isinstance(part, m.BaseToolCallPart):
        yield part.tool_name
        yield part.args if isinstance(part.args, str) else _text_of(part.args)
    elif isinstance(part, m.BaseToolReturnPart):
        if indexed and part.tool_name == RECALL_TOOL_NAME:
            return
        yield part.tool_name
        content = part.content
        if isinstance(content, list):
            yield ' '.join(_text_of(item) for item in content if not isinstance(item, m.BinaryContent))  # pyright: ignore[reportUnknownVariableType]
        elif not isinstance(content, m.BinaryContent):
            yield _text_of(content)
    elif isinstance(part, m.RetryPromptPart | m.RetryFeedbackPart):  # pyright: ignore[reportDeprecated]
        content = part.content
        yield content if isinstance(content, str) else _text_of(content)


def searchable_text(message: m.ModelMessage) -> str:
    """The text of `message` that search should find, parts joined by newlines; `''` if none."""
    return '\n'.join(text for part in message.parts for text in _part_texts(part) if text)


def transcript_text(message: m.ModelMessage) -> str:
    """What a person reading the conversation should see: the searchable text, plus the recall
    tool's own returns and compaction summaries, which are stored but deliberately not indexed."""
    return '\n'.join(text for part in message.parts for text in _part_texts(part, indexed=False) if text)


def is_summary(message: m.ModelMessage) -> bool:
    """Whether the message is a compaction summary, which is stored but never indexed."""
    return any(isinstance(part, m.CompactionPart) for part in message.parts)


def message_role(message: m.ModelMessage) -> str:
    """`user`, `assistant`, `tool` or `system`: who a reader would say spoke."""
    if isinstance(message, m.ModelResponse):
        return 'assistant'
    kinds = {type(part) for part in message.parts}
    if any(issubclass(kind, m.UserPromptPart) for kind in kinds):
        return 'user'
    if any(issubclass(kind, m.BaseToolReturnPart | m.RetryPromptPart | m.RetryFeedbackPart) for kind in kinds):  # pyright: ignore[reportDeprecated]
        return 'tool'
    return 'system'
