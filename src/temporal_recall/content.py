"""What a message *is*, independent of when and where pydantic-ai stamped it.

Temporal re-instantiates messages every time they cross an activity boundary, and a later run sends
earlier turns again as `message_history`. Both produce objects that are not the same Python object
and may not even compare equal (pydantic-ai stamps timestamps, `run_id`, `conversation_id` and the
request's resolved instructions after the fact). The store, the persistence capability and the
search index all need to recognise such a message as one already held, so they key it by a hash of
its canonical serialization with those after-the-fact fields cleared.

Everything here is pure: no I/O, no clock, no randomness. It is safe inside Temporal's workflow
sandbox, which is where the persistence capability computes hashes to decide what a write must
carry.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pydantic
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from pydantic_core import PydanticSerializationError

from .errors import MessageNotSerializable

__all__ = ('HASH_ALGORITHM', 'canonical_json', 'content_hash', 'dump_message', 'load_message')

HASH_ALGORITHM = 'sha256'
"""Named in stored rows' schema docs; changing it is a schema migration, not a refactor."""

_MESSAGE_STAMPS = frozenset({'timestamp', 'run_id', 'conversation_id'})
"""Fields pydantic-ai fills in when a message is created or sent, not part of what was said."""

_REQUEST_STAMPS = frozenset({'instructions'})
"""A request's resolved instructions are re-rendered per run; the conversation did not change."""

_PART_STAMPS = frozenset({'timestamp'})

_BOOKKEEPING_PART_KINDS = frozenset({'instruction-delta', 'instruction-baseline'})
"""Request parts that record how instructions were delivered rather than anything said."""

_SINGLE_MESSAGE = pydantic.TypeAdapter(ModelMessage)


def dump_message(message: ModelMessage) -> str:
    """Serialize one message with pydantic-ai's own adapter, as the store keeps it."""
    try:
        return ModelMessagesTypeAdapter.dump_json([message]).decode()[1:-1]
    except (PydanticSerializationError, ValueError, TypeError) as error:
        raise MessageNotSerializable(
            f'A {type(message).__name__} could not be serialized for storage ({error}). '
            'Tool returns and prompts must be JSON-serializable; convert custom objects to dicts or '
            'pydantic models before returning them.'
        ) from error


def load_message(data: str | bytes) -> ModelMessage:
    """Rehydrate one stored message with pydantic-ai's own adapter."""
    return _SINGLE_MESSAGE.validate_json(data)


def canonical_json(message: ModelMessage) -> str:
    """The message's serialization with after-the-fact stamps removed, keys sorted."""
    try:
        data: dict[str, Any] = ModelMessagesTypeAdapter.dump_python([message], mode='json')[0]
    except (PydanticSerializationError, ValueError, TypeError) as error:
        raise MessageNotSerializable(
            f'A {type(message).__name__} could not be serialized for hashing ({error}).'
        ) from error
    for key in _MESSAGE_STAMPS:
        data.pop(key, None)
    if data.get('kind') == 'request':
        for key in _REQUEST_STAMPS:
            data.pop(key, None)
    parts: list[dict[str, Any]] = []
    for part in data.get('parts', []):
        if part.get('part_kind') in _BOOKKEEPING_PART_KINDS:
            continue
        parts.append({key: value for key, value in part.items() if key not in _PART_STAMPS})
    data['parts'] = parts
    return json.dumps(data, sort_keys=True, separators=(',', ':'), ensure_ascii=False)


def content_hash(message: ModelMessage) -> str:
    """Hex digest identifying what the message says, stable across re-instantiation and re-sending."""
    return hashlib.sha256(canonical_json(message).encode()).hexdigest()
