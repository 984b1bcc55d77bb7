"""The body tree: how one JSON payload becomes content-addressed bodies, and back.

Pure functions and data, no I/O: `Addresser` walks a payload and collects the bodies it cuts out,
`references_in` lists the hashes a body or payload refers to, `restore` rebuilds the payload once
every body it reaches has been fetched. The codec (`_codec`) does the store reads and writes and
the caching around them.

    encoded payload:   {"$recall": "<sha256 of the root body>"}
    a body:            JSON in which {"$recall": h} stands for body h, and a list item
                       {"$recall-items": h} for the items of body h (a list), spliced in place
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections import OrderedDict
from typing import Any

from .._body_references import REF, RESERVED, SPLICE, reference, references_in
from ..errors import RecallError, shown

__all__ = (
    'CHUNK',
    'Addresser',
    'MissingMessageBody',
    'ReservedKey',
    'checked_references',
    'dump',
    'references_in',
    'restore',
)

CHUNK = 32
"""Items per stored chunk of a long list (a message history, most often)."""

_DIGEST = re.compile(r'[0-9a-f]{64}')
"""What `hashlib.sha256(...).hexdigest()` gives, and so the only reference a body can answer to."""


class MissingMessageBody(RecallError):
    """A payload references a body the store does not hold, or holds corrupted."""


class ReservedKey(Exception):
    """The payload already uses our reference keys; it is left inline rather than made ambiguous."""


def dump(value: Any) -> bytes:
    return json.dumps(value, separators=(',', ':'), ensure_ascii=False).encode()


def _is_message(value: dict[str, Any]) -> bool:
    return value.get('kind') in ('request', 'response') and isinstance(value.get('parts'), list)


@dataclasses.dataclass
class Addresser:
    """One payload's walk: replaces large subtrees by references, collecting the bodies by hash."""

    subtree_bytes: int
    bodies: dict[str, bytes] = dataclasses.field(default_factory=dict[str, bytes])

    def store(self, value: Any, body: bytes | None = None) -> str:
        """Collect `value` as a body; `body` is its JSON when the caller has already dumped it."""
        body = dump(value) if body is None else body
        digest = hashlib.sha256(body).hexdigest()
        self.bodies[digest] = body
        return digest

    def address(self, value: Any) -> Any:
        if isinstance(value, dict):
            if any(key in RESERVED for key in value):  # pyright: ignore[reportUnknownVariableType]
                raise ReservedKey
            node = {key: self.address(item) for key, item in value.items()}  # pyright: ignore[reportUnknownVariableType]
            if _is_message(value):  # pyright: ignore[reportUnknownArgumentType]
                return {REF: self.store(node)}
            return self._maybe_store(node)
        if isinstance(value, list):
            items = [self.address(item) for item in value]  # pyright: ignore[reportUnknownVariableType]
            if len(items) > CHUNK:
                full = len(items) - len(items) % CHUNK
                chunks = [{SPLICE: self.store(items[i : i + CHUNK])} for i in range(0, full, CHUNK)]
                items = [*chunks, *items[full:]]
            return self._maybe_store(items)
        return value

    def _maybe_store(self, node: Any) -> Any:
        body = dump(node)
        if len(body) >= self.subtree_bytes:
            return {REF: self.store(node, body)}
        return node


def checked_references(value: Any) -> set[str]:
    """The hashes a payload refers to, each checked to be a SHA-256 hex digest before any store sees it.

    Raises:
        MissingMessageBody: A reference that no body can have (it could only have been forged).
    """
    found: set[str] = set()
    references_in(value, found)
    for digest in found:
        if not _DIGEST.fullmatch(digest):
            raise MissingMessageBody(
                f'{shown(digest)} is not a message body reference (64 lowercase hexadecimal characters); '
                'the payload was not written by RecallDataCodec.'
            )
    return found


def restore(value: Any, bodies: OrderedDict[str, tuple[Any, int]]) -> Any:
    digest = reference(value)
    if digest is not None:
        return restore(bodies[digest][0], bodies)
    if isinstance(value, dict):
        return {key: restore(item, bodies) for key, item in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list):
        restored: list[Any] = []
        for item in value:  # pyright: ignore[reportUnknownVariableType]
            spliced = reference(item, SPLICE)
            if spliced is None:
                restored.append(restore(item, bodies))
                continue
            chunk = restore(bodies[spliced][0], bodies)
            if not isinstance(chunk, list):
                raise MissingMessageBody(f'Body {spliced} is spliced into a list but is not a list.')
            restored.extend(chunk)  # pyright: ignore[reportUnknownArgumentType]
        return restored
    return value
