"""Keep Temporal history small: store each pydantic-ai message once, put only its hash in payloads.

pydantic-ai's Temporal integration sends the whole message history into every model-request
activity, so a run's history grows with the square of its length and long runs hit Temporal's
50 MB history limit. This payload codec replaces every message inside a large payload with a
reference to its body, stored once per tenant scope in the conversation store and addressed by the
SHA-256 of its bytes. A history of N model requests then carries N small lists of references
instead of N copies of a growing history.

Codecs run outside workflow code (in the client and the worker's payload path), so the store I/O
here never enters the workflow sandbox. A replay decodes from the store exactly as the original run
did, which is the operational contract: the bodies table must be kept (and backed up) as long as
the namespace can replay histories that reference it; deleting a conversation does not delete them.
If the store is unreachable, encoding or decoding raises, the workflow task or activity fails and
Temporal retries it; nothing is dropped or replaced silently.

    RecallDataCodec
    encode: payload JSON  ->  same JSON, each message dict replaced by {"$recall": "<sha256>"}
    decode: references    ->  bodies fetched in one batch, verified against their hash
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol

from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter, PayloadCodec
from temporalio.plugin import SimplePlugin

from ._store_provider import StoreProvider
from .errors import RecallError

__all__ = ('BodyStore', 'MessageCodecPlugin', 'MissingMessageBody', 'RecallDataCodec', 'message_codec_plugin')

ENCODING = b'binary/temporal-recall-refs'
"""Payload encoding of a payload whose messages were moved to the store."""

_ORIGINAL_ENCODING = 'temporal-recall-encoding'
_REF = '$recall'


class MissingMessageBody(RecallError):
    """A payload references a message body the store does not hold, or holds corrupted."""


class BodyStore(Protocol):
    async def put_bodies(self, scope: str | None, bodies: dict[str, bytes]) -> None: ...

    async def get_bodies(self, scope: str | None, hashes: Sequence[str]) -> dict[str, bytes]: ...


def _is_message(value: dict[str, Any]) -> bool:
    return value.get('kind') in ('request', 'response') and isinstance(value.get('parts'), list)


def _extract(value: Any, bodies: dict[str, bytes]) -> Any:
    """`value` with every message dict replaced by a reference; the bodies collected by hash."""
    if isinstance(value, dict):
        if _is_message(value):  # pyright: ignore[reportUnknownArgumentType]
            body = json.dumps(value, separators=(',', ':'), ensure_ascii=False).encode()
            digest = hashlib.sha256(body).hexdigest()
            bodies[digest] = body
            return {_REF: digest}
        return {key: _extract(item, bodies) for key, item in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list):
        return [_extract(item, bodies) for item in value]  # pyright: ignore[reportUnknownVariableType]
    return value


def _references(value: Any, found: set[str]) -> None:
    if isinstance(value, dict):
        if len(value) == 1 and isinstance(value.get(_REF), str):  # pyright: ignore[reportUnknownMemberType]
            found.add(value[_REF])
            return
        for item in value.values():  # pyright: ignore[reportUnknownVariableType]
            _references(item, found)
    elif isinstance(value, list):
        for item in value:  # pyright: ignore[reportUnknownVariableType]
            _references(item, found)


def _restore(value: Any, bodies: dict[str, Any]) -> Any:
    if isinstance(value, dict):
        if len(value) == 1 and isinstance(value.get(_REF), str):  # pyright: ignore[reportUnknownMemberType]
            return bodies[value[_REF]]
        return {key: _restore(item, bodies) for key, item in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list):
        return [_restore(item, bodies) for item in value]  # pyright: ignore[reportUnknownVariableType]
    return value


class RecallDataCodec(PayloadCodec):
    """A payload codec that stores pydantic-ai message bodies once and writes references instead.

    Args:
        store: Where bodies live (a URL, a `StoreProvider`, or an open store); the default is the
            worker's store.
        scope: The tenant scope bodies belong to. References only resolve within it.
        threshold_bytes: Payloads smaller than this stay inline untouched.
        cache_size: Bodies kept in memory per process, so a run's repeated history is fetched once.
    """

    def __init__(
        self,
        store: str | StoreProvider | Any | None = None,
        *,
        scope: str | None = None,
        threshold_bytes: int = 4096,
        cache_size: int = 20_000,
    ) -> None:
        self.store = StoreProvider.coerce(store)
        self.scope = scope
        self.threshold_bytes = threshold_bytes
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self._cache_size = cache_size

    async def _bodies(self) -> BodyStore:
        store = await self.store.get()
        if not hasattr(store, 'put_bodies'):
            raise RecallError(f'{type(store).__name__} cannot hold message bodies for RecallDataCodec.')
        return store  # type: ignore[return-value]

    async def aclose(self) -> None:
        """Close the store this codec opened from a URL (a worker's shutdown, or a test's end)."""
        await self.store.aclose()

    def _remember(self, digest: str, body: Any) -> None:
        self._cache[digest] = body
        self._cache.move_to_end(digest)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        encoded: list[Payload] = []
        pending: dict[str, bytes] = {}
        for payload in payloads:
            if len(payload.data) < self.threshold_bytes or payload.metadata.get('encoding') != b'json/plain':
                encoded.append(payload)
                continue
            bodies: dict[str, bytes] = {}
            stripped = _extract(json.loads(payload.data), bodies)
            if not bodies:
                encoded.append(payload)
                continue
            for digest, body in bodies.items():
                if digest not in self._cache:
                    pending[digest] = body
            metadata = dict(payload.metadata)
            metadata[_ORIGINAL_ENCODING] = metadata['encoding']
            metadata['encoding'] = ENCODING
            encoded.append(Payload(metadata=metadata, data=json.dumps(stripped, separators=(',', ':')).encode()))
        if pending:
            store = await self._bodies()
            await store.put_bodies(self.scope, pending)
            for digest, body in pending.items():
                self._remember(digest, json.loads(body))
        return encoded

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        parsed: list[Any] = []
        wanted: set[str] = set()
        for payload in payloads:
            if payload.metadata.get('encoding') != ENCODING:
                parsed.append(None)
                continue
            value = json.loads(payload.data)
            _references(value, wanted)
            parsed.append(value)
        missing = [digest for digest in wanted if digest not in self._cache]
        if missing:
            store = await self._bodies()
            fetched = await store.get_bodies(self.scope, missing)
            for digest in missing:
                body = fetched.get(digest)
                if body is None:
                    raise MissingMessageBody(
                        f'Message body {digest} is not in the store for scope {self.scope!r}; the history that '
                        'references it cannot be decoded. Restore the store backup that holds it.'
                    )
                if hashlib.sha256(body).hexdigest() != digest:
                    raise MissingMessageBody(
                        f'Message body {digest} in scope {self.scope!r} does not match its hash: the stored body '
                        'is corrupted. Restore it from a backup.'
                    )
                self._remember(digest, json.loads(body))
        decoded: list[Payload] = []
        for payload, value in zip(payloads, parsed, strict=True):
            if value is None:
                decoded.append(payload)
                continue
            metadata = dict(payload.metadata)
            metadata['encoding'] = metadata.pop(_ORIGINAL_ENCODING)
            data = json.dumps(_restore(value, self._cache), separators=(',', ':'), ensure_ascii=False).encode()
            decoded.append(Payload(metadata=metadata, data=data))
        return decoded


def message_codec_plugin(
    store: str | StoreProvider | Any | None = None, *, scope: str | None = None, threshold_bytes: int = 4096
) -> MessageCodecPlugin:
    """One line to opt in: pass the result in `plugins=[...]` of the client (and so its workers) and the Replayer."""
    codec = RecallDataCodec(store, scope=scope, threshold_bytes=threshold_bytes)
    plugin = MessageCodecPlugin('temporal-recall.message-codec', codec=codec)

    def with_codec(converter: DataConverter | None) -> DataConverter:
        base = converter or DataConverter()
        if base.payload_codec is not None and base.payload_codec is not codec:
            raise RecallError('The data converter already has a payload codec; RecallDataCodec must be the only one.')
        return dataclasses.replace(base, payload_codec=codec)

    plugin.data_converter = with_codec
    return plugin


class MessageCodecPlugin(SimplePlugin):
    """A `SimplePlugin` that also exposes its codec, so its owner can close the codec's store."""

    def __init__(self, name: str, *, codec: RecallDataCodec) -> None:
        super().__init__(name)  # pyright: ignore[reportUnknownMemberType]
        self.codec = codec
