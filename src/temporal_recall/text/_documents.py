"""Which words of a message are searchable, and who said them.

A document is what one speaker said in one message (`searchable_texts`), so a role filter keeps only
that speaker's words. Documents hold what a person expects to find again and leave out what is not
conversation (thinking, binary content) and compaction summaries: the messages a summary replaced stay
findable, and indexing the summary would find the same words twice. docs/design/store.md ("Text analysis")
lists the summary shapes recognised.
"""

from __future__ import annotations

import codecs
import json
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from pydantic_ai import messages as m

from ._analyzer import term_frequencies

__all__ = (
    'MAX_ATTACHMENT_BYTES',
    'RECALL_TOOL_NAME',
    'SUMMARY_METADATA',
    'SUMMARY_METADATA_KEY',
    'SUMMARY_PREFIX',
    'SummaryRule',
    'analysed_documents',
    'document_texts',
    'is_summary',
    'is_summary_part',
    'message_role',
    'part_role',
    'searchable_text',
    'searchable_texts',
    'transcript_text',
)

RECALL_TOOL_NAME = 'search_conversation_history'
"""The model's recall tool. Its returns quote other messages, so they are stored but not indexed:
indexing them would make every later search find the same words again in the quote."""

SUMMARY_PREFIX = 'Summary of previous conversation:\n\n'
"""How a pydantic-ai-harness summary written as a system prompt begins, exactly."""

SUMMARY_METADATA_KEY = 'pydantic-ai-harness.compaction.summary.v1'
SUMMARY_METADATA: dict[str, Any] = {SUMMARY_METADATA_KEY: True}
"""The metadata pydantic-ai-harness marks a summary with: exactly this on the user-turn text it
writes, and this key (set to `True`) on the `CompactionPart` it writes."""

MAX_ATTACHMENT_BYTES = 65_536
"""How much of one `text/*` attachment is indexed: its first 64 KiB. The rest is stored with the
message but not searchable; it bounds what one attachment adds to the index (about 10,000 words)."""

SummaryRule = Callable[[m.ModelMessage], bool]
"""An application's own rule for which messages are summaries: stored, but never indexed. It should be
a pure function of the message; the store records its answer with the message when it is written."""


def _text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ''
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _attachment_text(content: m.BinaryContent) -> str:
    """The text of a `text/*` attachment, cut to `MAX_ATTACHMENT_BYTES`; `''` for any other media type."""
    media_type, _, parameters = content.media_type.partition(';')
    if not media_type.strip().lower().startswith('text/'):
        return ''
    encoding = 'utf-8'
    for parameter in parameters.split(';'):
        name, _, value = parameter.partition('=')
        if name.strip().lower() == 'charset' and value.strip():
            encoding = value.strip().strip('"')
    try:
        codecs.lookup(encoding)
    except LookupError:
        encoding = 'utf-8'
    return content.data[:MAX_ATTACHMENT_BYTES].decode(encoding, errors='replace')


def _is_marked_summary(item: Any) -> bool:
    return isinstance(item, m.TextContent) and item.metadata == SUMMARY_METADATA


def _content_texts(items: Iterable[Any], *, summaries: bool) -> Iterable[str]:
    """Text of user-prompt or tool-return items: strings, text items and text attachments."""
    for item in items:
        if isinstance(item, str):
            yield item
        elif isinstance(item, m.TextContent):
            if summaries or not _is_marked_summary(item):
                yield item.content
        elif isinstance(item, m.BinaryContent):
            yield _attachment_text(item)
        elif not isinstance(item, m.FileUrl | m.UploadedFile | m.CachePoint):
            yield _text_of(item)


def is_summary_part(part: Any) -> bool:
    """Whether `part` is a summary in one of the known shapes (see the module docstring)."""
    if isinstance(part, m.CompactionPart):
        return True
    if isinstance(part, m.SystemPromptPart):
        return part.dynamic_ref is None and part.content.startswith(SUMMARY_PREFIX)
    if isinstance(part, m.UserPromptPart) and not isinstance(part.content, str):
        return any(_is_marked_summary(item) for item in part.content)
    return False


def _part_texts(part: Any, *, indexed: bool) -> Iterable[str]:
    if isinstance(part, m.CompactionPart):
        if not indexed and isinstance(part.content, str):
            yield part.content
        return
    if isinstance(part, m.SystemPromptPart):
        if not indexed or not is_summary_part(part):
            yield part.content
    elif isinstance(part, m.TextPart):
        yield part.content
    elif isinstance(part, m.UserPromptPart):
        content = part.content
        yield from _content_texts([content] if isinstance(content, str) else content, summaries=not indexed)
    elif isinstance(part, m.SpeechPart):
        if part.transcript:
            yield part.transcript
    elif isinstance(part, m.FilePart):
        yield _attachment_text(part.content)
    elif isinstance(part, m.BaseToolCallPart):
        yield part.tool_name
        yield part.args if isinstance(part.args, str) else _text_of(part.args)
    elif isinstance(part, m.BaseToolReturnPart):
        if indexed and part.tool_name == RECALL_TOOL_NAME:
            return
        yield part.tool_name
        content = part.content
        if isinstance(content, list):
            yield ' '.join(_content_texts(content, summaries=True))  # pyright: ignore[reportUnknownArgumentType]
        elif isinstance(content, m.BinaryContent):
            yield _attachment_text(content)
        else:
            yield _text_of(content)
    elif isinstance(part, m.RetryPromptPart | m.RetryFeedbackPart):  # pyright: ignore[reportDeprecated]
        content = part.content
        yield content if isinstance(content, str) else _text_of(content)


def part_role(message: m.ModelMessage, part: Any) -> str:
    """`user`, `assistant`, `tool` or `system`: who said `part` of `message`.

    Everything in a response is the assistant's. In a request, prompts and speech are the user's,
    tool returns and retry feedback a tool's, and the rest (system prompts) the system's: pydantic-ai
    sends an agent's system prompt in the same request as the first user prompt, and each keeps its
    own speaker.
    """
    if isinstance(message, m.ModelResponse):
        return 'assistant'
    if isinstance(part, m.UserPromptPart | m.SpeechPart):
        return 'user'
    if isinstance(part, m.BaseToolReturnPart | m.RetryPromptPart | m.RetryFeedbackPart):  # pyright: ignore[reportDeprecated]
        return 'tool'
    return 'system'


def searchable_texts(message: m.ModelMessage, *, summary: SummaryRule | None = None) -> list[tuple[str, str]]:
    """The text of `message` that search should find, by speaker: one `(role, text)` per role whose
    parts carry words, in the order each role first speaks, its parts joined by newlines.

    Each is a document of its own in the index, so a role filter finds exactly what that speaker
    said. A message with one speaker has one, `searchable_text(message)` under `message_role`.
    Summaries are left out as in `searchable_text`.
    """
    if summary is not None and summary(message):
        return []
    by_role: dict[str, list[str]] = {}
    for part in message.parts:
        texts = [text for text in _part_texts(part, indexed=True) if text]
        if texts:
            by_role.setdefault(part_role(message, part), []).extend(texts)
    return [(role, '\n'.join(texts)) for role, texts in by_role.items()]


def analysed_documents(message: m.ModelMessage) -> list[tuple[str, str, Counter[str], int]]:
    """The message's documents as the index holds them: `(role, text, term frequencies, length)` of each
    speaker (`searchable_texts`) whose words hold a term, in the order they speak."""
    found: list[tuple[str, str, Counter[str], int]] = []
    for role, text in searchable_texts(message):
        frequencies, length = term_frequencies(text)
        if length:
            found.append((role, text, frequencies, length))
    return found


def document_texts(message: m.ModelMessage) -> list[tuple[str, str]]:
    """`(role, text)` of each of the message's documents (`analysed_documents`): what is embedded for it."""
    return [(role, text) for role, text, _, _ in analysed_documents(message)]


def searchable_text(message: m.ModelMessage, *, summary: SummaryRule | None = None, role: str | None = None) -> str:
    """The text of `message` that search should find, parts joined by newlines; `''` if none.

    Summaries in the known shapes are left out; a message `summary` (an application's own rule)
    accepts has no searchable text at all. With `role`, only the parts that speaker said
    (`part_role`).
    """
    if summary is not None and summary(message):
        return ''
    return '\n'.join(
        text
        for part in message.parts
        if role is None or part_role(message, part) == role
        for text in _part_texts(part, indexed=True)
        if text
    )


def transcript_text(message: m.ModelMessage) -> str:
    """What a person reading the conversation should see: the searchable text, plus the recall
    tool's own returns and summaries, which are stored but deliberately not indexed."""
    return '\n'.join(text for part in message.parts for text in _part_texts(part, indexed=False) if text)


def is_summary(message: m.ModelMessage) -> bool:
    """Whether the message holds a summary in a known shape (its other parts may still be indexed)."""
    return any(is_summary_part(part) for part in message.parts)


def message_role(message: m.ModelMessage) -> str:
    """`user`, `assistant`, `tool` or `system`: who a reader would say spoke the whole message (a
    transcript's line). Search goes by each part's speaker instead (`part_role`)."""
    if isinstance(message, m.ModelResponse):
        return 'assistant'
    kinds = {type(part) for part in message.parts}
    if any(issubclass(kind, m.UserPromptPart | m.SpeechPart) for kind in kinds):
        return 'user'
    if any(issubclass(kind, m.BaseToolReturnPart | m.RetryPromptPart | m.RetryFeedbackPart) for kind in kinds):  # pyright: ignore[reportDeprecated]
        return 'tool'
    return 'system'
