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

import dataclasses
import functools
import hashlib
import json
from collections.abc import Sequence
from typing import Any

import pydantic
from pydantic_ai import messages as pydantic_ai_messages
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelRequest
from pydantic_core import PydanticSerializationError

from ._message_fields import CONTENT_FIELDS, MESSAGE_FIELDS, PART_FIELDS
from ._pydantic_ai_private import merge_consecutive_messages
from .errors import MessageNotSerializable

__all__ = (
    'CANONICAL_FORM',
    'HASH_ALGORITHM',
    'as_one_request',
    'canonical_json',
    'content_hash',
    'dump_message',
    'form_1_hashes',
    'held_hashes',
    'load_message',
    'resent_hash',
    'said_parts',
    'without_said_parts',
)

HASH_ALGORITHM = 'sha256'
"""Named in stored rows' schema docs; changing it is a schema migration, not a refactor."""

CANONICAL_FORM = 2
"""The version of the canonical form `content_hash` digests. Form 1 was pydantic-ai's whole serialization
less the stamps, and so moved when a release added a field; form 2 is pinned to the fields of 2.68
(`_message_fields`), and gives every message 2.68 could hold the hash form 1 gave it then."""

_MESSAGE_STAMPS = frozenset({'timestamp', 'run_id', 'conversation_id'})
"""Fields pydantic-ai fills in when a message is created or sent, not part of what was said."""

_REQUEST_STAMPS = frozenset({'instructions'})
"""A request's resolved instructions are re-rendered per run; the conversation did not change."""

_RESPONSE_STAMPS = frozenset({'duration', 'request_timestamp'})
"""When a response was asked for and how long it took (pydantic-ai 2.78): a retry says the same in other times."""

_PART_STAMPS = frozenset({'timestamp'})

_BOOKKEEPING_PART_KINDS = frozenset({'instruction-delta', 'instruction-baseline'})
"""Request parts that record how instructions were delivered rather than anything said."""

_RESENT_MESSAGE = frozenset({'metadata'})
"""What a chat UI's round trip changes on any message: the Vercel AI and AG-UI adapters add their UI
message id to `metadata`, and AG-UI drops the application's keys."""

_RESENT_RESPONSE = frozenset(
    {
        'usage',
        'model_name',
        'model_id',
        'provider_name',
        'provider_url',
        'provider_details',
        'provider_response_id',
        'finish_reason',
        'canonical_system',
        'history_digest',
        'workspace_ref',
    }
)
"""Response fields neither protocol carries back (and the adapters reset `workspace_ref` on client messages)."""

_RESENT_RESPONSE_PART = frozenset({'id', 'provider_name', 'provider_details'})
"""Part fields AG-UI does not carry back (Vercel AI keeps them in `providerMetadata`)."""

_RESENT_TOOL_RETURN = frozenset({'metadata'})
"""A tool return's `metadata` is for the application, and neither protocol carries it."""

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
    return _dumps(_canonical(message))


def _dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, sort_keys=True, separators=(',', ':'), ensure_ascii=False)


def _canonical(message: ModelMessage) -> dict[str, Any]:
    """The message in canonical form 2: what was said, in the fields pydantic-ai 2.68 defined (see
    `_message_fields`), plus any field added since that holds more than its default."""
    data = _without_stamps(_serialized(message), response_stamps=_RESPONSE_STAMPS)
    kind = str(data.get('kind'))
    _pinned(data, MESSAGE_FIELDS.get(kind), _added_defaults('kind', kind))
    for part in data['parts']:
        part_kind = str(part.get('part_kind'))
        _pinned(part, PART_FIELDS.get(part_kind), _added_defaults('part_kind', part_kind))
        if part_kind == 'user-prompt' and isinstance(part.get('content'), list):
            for item in part['content']:
                if isinstance(item, dict) and isinstance(item.get('kind'), str):
                    _pinned(item, CONTENT_FIELDS.get(item['kind']), _added_defaults('kind', item['kind']))
    return data


def _without_stamps(data: dict[str, Any], *, response_stamps: frozenset[str]) -> dict[str, Any]:
    """A serialized message without what pydantic-ai stamps after the fact, nor its bookkeeping parts.

    `response_stamps`: form 2 leaves out when a response was asked for and how long it took; form 1 kept them.
    """
    for key in _MESSAGE_STAMPS | (response_stamps if data.get('kind') == 'response' else _REQUEST_STAMPS):
        data.pop(key, None)
    data['parts'] = [
        {key: value for key, value in part.items() if key not in _PART_STAMPS}
        for part in data.get('parts', [])
        if part.get('part_kind') not in _BOOKKEEPING_PART_KINDS
    ]
    return data


def _serialized(message: ModelMessage) -> dict[str, Any]:
    try:
        return ModelMessagesTypeAdapter.dump_python([message], mode='json')[0]
    except (PydanticSerializationError, ValueError, TypeError) as error:
        raise MessageNotSerializable(
            f'A {type(message).__name__} could not be serialized for hashing ({error}).'
        ) from error


def _pinned(data: dict[str, Any], pinned: frozenset[str] | None, defaults: dict[str, Any]) -> None:
    """Drop, in place, each field outside `pinned` that holds its default (`None` when pydantic-ai gives none)."""
    for key in [key for key in data if key not in (pinned or ()) and key not in ('kind', 'part_kind')]:
        if data[key] == defaults.get(key):
            del data[key]


@functools.cache
def _added_defaults(discriminator: str, kind: str) -> dict[str, Any]:
    """The serialized defaults of the installed pydantic-ai's message classes of `kind`, by field name.

    Only plain values count (`None`, text, numbers, an empty list or dict); a field whose default is
    made anew each time (an id, a time) is never at it. Pure and cached: it reads class definitions only.
    """
    defaults: dict[str, Any] = {}
    for cls in _message_classes().get((discriminator, kind), ()):
        for field in dataclasses.fields(cls):
            if field.default is not dataclasses.MISSING:
                value: Any = field.default
            elif field.default_factory is list or field.default_factory is dict:
                value = field.default_factory()
            else:
                continue
            if value is None or isinstance(value, str | int | float | bool | list | dict):
                defaults.setdefault(field.name.lstrip('_'), value)
    return defaults


@functools.cache
def _message_classes() -> dict[tuple[str, str], list[type]]:
    """pydantic-ai's message, part and content classes by their discriminator (`kind` or `part_kind`) and its value."""
    classes: dict[tuple[str, str], list[type]] = {}
    for value in vars(pydantic_ai_messages).values():
        if not (isinstance(value, type) and dataclasses.is_dataclass(value)):
            continue
        for field in dataclasses.fields(value):
            if field.name in ('kind', 'part_kind') and isinstance(field.default, str):
                classes.setdefault((field.name, field.default), []).append(value)
                break
    return classes


def form_1_hashes(message: ModelMessage) -> tuple[str, str]:
    """The hashes canonical form 1 gave `message` (as pydantic-ai 2.68 held it, then as the installed
    release serializes it), for step markers recorded before form 2.

    Form 1 was the release's whole serialization less the stamps, so it moved with pydantic-ai:
    under 2.68 it is form 2 of the message as 2.68 held it (output tool calls and returns not yet
    stamped with `tool_kind='output'`, no `ui_visibility`); under a later release it is that
    release's serialization. Only a marker with no form of its own is compared with these.
    """
    as_268 = _canonical(_as_pydantic_ai_268(message))
    whole = _without_stamps(_serialized(message), response_stamps=frozenset())
    return _digest(_dumps(as_268), message), _digest(_dumps(whole), message)


def _as_pydantic_ai_268(message: ModelMessage) -> ModelMessage:
    """`message` without what pydantic-ai 2.78 stamps on tool parts in workflow code and 2.68 did not."""
    parts = [_unstamped(part) for part in message.parts]
    if all(new is old for new, old in zip(parts, message.parts, strict=True)):
        return message
    return dataclasses.replace(message, parts=parts)  # pyright: ignore[reportArgumentType]


def _unstamped(part: Any) -> Any:
    changes: dict[str, Any] = {}
    if getattr(part, 'tool_kind', None) == 'output':
        changes['tool_kind'] = None
    if getattr(part, 'ui_visibility', None) is not None:
        changes['ui_visibility'] = None
    return dataclasses.replace(part, **changes) if changes else part


def said_parts(message: ModelMessage) -> list[str]:
    """What each part of `message` says, in order: the parts `content_hash` covers, each as canonical JSON."""
    return [_dumps(part) for part in _canonical(message)['parts']]


def without_said_parts(request: ModelRequest, count: int) -> ModelRequest:
    """`request` without the first `count` of its `said_parts` (the parts recording how instructions were
    delivered stay: they belong to the request as sent)."""
    parts: list[Any] = []
    for part in request.parts:
        if count and part.part_kind not in _BOOKKEEPING_PART_KINDS:
            count -= 1
            continue
        parts.append(part)
    return dataclasses.replace(request, parts=parts)


def as_one_request(requests: Sequence[ModelRequest]) -> ModelRequest | None:
    """Consecutive requests as a run holds them: pydantic-ai merges requests no response separates into
    one, when it loads a history and when it sends one to the model. `None` when it keeps them apart
    (their instructions differ)."""
    if len(requests) == 1:
        return requests[0]
    merged = merge_consecutive_messages(list(requests))
    return merged[0] if len(merged) == 1 and isinstance(merged[0], ModelRequest) else None


def held_hashes(messages: Sequence[ModelMessage]) -> list[tuple[str, int]]:
    """The `content_hash` of each message of `messages` as a run that loads them holds it, with how many
    of `messages` it stands for: more than one where requests no response separates are merged."""
    held: list[tuple[str, int]] = []
    start = 0
    while start < len(messages):
        end = start + 1
        while (
            isinstance(messages[start], ModelRequest)
            and end < len(messages)
            and isinstance(messages[end], ModelRequest)
        ):
            end += 1
        group = messages[start:end]
        merged = as_one_request([m for m in group if isinstance(m, ModelRequest)]) if end - start > 1 else group[0]
        if merged is None:
            held.extend((content_hash(message), 1) for message in group)
        else:
            held.append((content_hash(merged), end - start))
        start = end
    return held


def content_hash(message: ModelMessage) -> str:
    """Hex digest identifying what the message says, stable across re-instantiation and re-sending.

    Raises:
        MessageNotSerializable: If the message cannot be serialized, or holds text that is not valid
            Unicode (a lone surrogate), which no store can hold either.
    """
    return _digest(canonical_json(message), message)


def _digest(canonical: str, message: ModelMessage) -> str:
    try:
        return hashlib.sha256(canonical.encode()).hexdigest()
    except UnicodeEncodeError as error:
        raise MessageNotSerializable(
            f'A {type(message).__name__} holds text that is not valid Unicode ({error}); a lone surrogate '
            'usually comes from decoding half of a character pair. Replace it before the message is stored.'
        ) from error


def resent_hash(message: ModelMessage) -> str:
    """Hex digest of what the message says as a chat UI sends it back: `content_hash` without the
    fields a Vercel AI or AG-UI round trip drops or changes (see the README's "Behind a chat UI").

    Not an identity: the store keys and indexes messages by `content_hash`. It only lets a re-sent
    history attach to the stored one (`store/log/_append.py`), so a client that keeps its own history does
    not branch the conversation on an unchanged turn, while an edit of anything said still does.
    """
    data = _canonical(message)
    response = data.get('kind') == 'response'
    for key in _RESENT_MESSAGE | (_RESENT_RESPONSE if response else frozenset[str]()):
        data.pop(key, None)
    for part in data['parts']:
        kind = part.get('part_kind')
        dropped = _RESENT_TOOL_RETURN if kind == 'tool-return' else _RESENT_RESPONSE_PART if response else ()
        for key in dropped:
            part.pop(key, None)
        if kind == 'tool-call':
            part['args'] = _parsed_args(part.get('args'))
    return _digest(_dumps(data), message)


def _parsed_args(args: Any) -> Any:
    """Tool-call arguments as JSON values: Vercel AI sends back an object, AG-UI its own serialization of it."""
    if args is None or args == '':
        return {}
    if isinstance(args, str):
        try:
            return json.loads(args)
        except ValueError:
            return args
    return args
