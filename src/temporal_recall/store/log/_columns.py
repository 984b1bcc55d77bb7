"""Turning records and messages into column values and back, independent of the database.

More in docs/design/store.md.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

import pydantic
import pydantic_core
from pydantic_ai.conversation_store import ConversationRecord
from pydantic_ai.tools import DeferredToolRequests
from pydantic_ai.usage import RunUsage

from temporal_recall.errors import MessageNotSerializable

__all__ = (
    'RecordColumns',
    'dump_deferred',
    'dump_usage',
    'load_deferred',
    'load_timestamp',
    'load_usage',
    'record_columns',
    'record_from_columns',
    'timestamp_order',
)

_USAGE = pydantic.TypeAdapter(RunUsage)
_DEFERRED = pydantic.TypeAdapter(DeferredToolRequests)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def dump_usage(usage: RunUsage) -> str:
    return _USAGE.dump_json(usage).decode()


def load_usage(data: str | bytes) -> RunUsage:
    return _USAGE.validate_json(data)


def dump_deferred(requests: DeferredToolRequests | None) -> str | None:
    if requests is None:
        return None
    try:
        return _DEFERRED.dump_json(requests).decode()
    except (pydantic_core.PydanticSerializationError, ValueError, TypeError) as error:
        raise MessageNotSerializable(
            f'The deferred tool requests could not be serialized for storage ({error}). '
            'Tool call arguments and metadata must be JSON-serializable.'
        ) from error


def load_deferred(data: str | bytes | None) -> DeferredToolRequests | None:
    return None if data is None else _DEFERRED.validate_json(data)


def timestamp_order(moment: datetime) -> int:
    """Microseconds since the epoch, the sort key of `updated_at` (a naive datetime is taken as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def load_timestamp(text: str) -> datetime:
    return datetime.fromisoformat(text)


@dataclass(frozen=True, kw_only=True)
class RecordColumns:
    """A `ConversationRecord` as column values. Entry references stay ids; the backend resolves them."""

    conversation_id: str
    scope: str | None
    head_id: str | None
    branches: list[str]
    usage: str
    deferred_tool_requests: str | None
    forked_from: str | None
    forked_at: str | None
    revision: str
    updated_at: str
    updated_order: int
    format_version: int


def record_columns(record: ConversationRecord) -> RecordColumns:
    return RecordColumns(
        conversation_id=record.conversation_id,
        scope=record.scope,
        head_id=record.head_id,
        branches=list(record.branches),
        usage=dump_usage(record.usage),
        deferred_tool_requests=dump_deferred(record.deferred_tool_requests),
        forked_from=record.forked_from,
        forked_at=record.forked_at,
        revision=record.revision,
        updated_at=record.updated_at.isoformat(),
        updated_order=timestamp_order(record.updated_at),
        format_version=record.format_version,
    )


def record_from_columns(
    *,
    conversation_id: str,
    scope: str | None,
    head_id: str | None,
    branches: Sequence[str],
    usage: str,
    deferred_tool_requests: str | None,
    forked_from: str | None,
    forked_at: str | None,
    revision: str,
    updated_at: str,
    format_version: int,
    title: str | None = None,
    metadata: str | None = None,
) -> ConversationRecord:
    version: Literal[1] = 1
    if format_version != version:
        raise ValueError(f'Conversation {conversation_id!r} has record format {format_version}, expected {version}.')
    return ConversationRecord(
        conversation_id=conversation_id,
        head_id=head_id,
        usage=load_usage(usage),
        deferred_tool_requests=load_deferred(deferred_tool_requests),
        scope=scope,
        forked_from=forked_from,
        forked_at=forked_at,
        branches=list(branches),
        revision=revision,
        updated_at=load_timestamp(updated_at),
        format_version=version,
        title=title,
        metadata=None if metadata is None else json.loads(metadata),
    )
