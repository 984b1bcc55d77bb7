"""`RecallDataCodec`: large payloads live in the store, content-addressed, and history keeps their hashes.

pydantic-ai's Temporal integration sends the whole message history into every model-request activity,
so a run's history grows with the square of its length until it hits Temporal's history limit. Each
message, each fixed chunk of a long list and each large subtree is stored once per tenant scope
(`_tree`). A replay decodes from the store as the original run did, so bodies are kept while a history
can be replayed (`store._bodies`), and an unreachable store fails the task for Temporal to retry.
docs/design/store.md ("The payload codec") has the details.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter, PayloadCodec
from temporalio.plugin import SimplePlugin

from .._store_provider import StoreProvider
from .._tracing import CODEC_FETCH, CODEC_STORE, note, span
from ..errors import ConfigurationError, RecallError
from ..store.protocol import BODY_TOUCH_INTERVAL, BodyStore
from ._tree import CHUNK, Addresser, MissingMessageBody, ReservedKey, checked_references, dump, references_in, restore

__all__ = (
    'CHUNK',
    'ENCODING',
    'BodyStore',
    'MessageCodecPlugin',
    'MissingMessageBody',
    'RecallDataCodec',
    'UnencodablePayload',
    'message_codec_plugin',
    'payload_references',
)

ENCODING = b'binary/temporal-recall-refs'
"""Payload encoding of a payload whose content was moved to the store."""

_ORIGINAL_ENCODING = 'temporal-recall-encoding'
_MAX_DEPTH = 64
"""Fetch rounds before a reference chain is refused: bodies nest a handful of levels deep."""


class UnencodablePayload(RecallError, ValueError):
    """A `json/plain` payload that is not JSON this codec can store: invalid JSON or UTF-8, a lone
    surrogate, or nesting deeper than Python can walk. The SDK's converter never writes one; a codec
    server's caller can."""

    def __init__(self, index: int, error: BaseException) -> None:
        self.index = index
        reason = 'it nests too deeply' if isinstance(error, RecursionError) else str(error)[:200]
        super().__init__(f'Payload {index} is json/plain but not storable JSON: {reason}.')


class RecallDataCodec(PayloadCodec):
    """A payload codec that stores large payloads as content-addressed bodies and keeps only hashes.

    Args:
        store: Where bodies live (a URL, a `StoreProvider`, or an open store): the store the
            workers use, opened lazily on first use.
        scope: The tenant scope bodies belong to. References only resolve within it.
        threshold_bytes: JSON payloads smaller than this stay inline untouched.
        subtree_bytes: Inside an encoded payload, objects and lists whose JSON is at least this
            long become bodies of their own (messages always do).
        cache_bytes: Decoded bodies kept in memory per process (by their stored size), so a run's
            repeated history and run context are fetched once.
    """

    def __init__(
        self,
        store: str | StoreProvider | Any,
        *,
        scope: str | None = None,
        threshold_bytes: int = 512,
        subtree_bytes: int = 256,
        cache_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        if threshold_bytes < 0 or subtree_bytes < 0 or cache_bytes < 0:
            raise ValueError(
                'RecallDataCodec needs threshold_bytes, subtree_bytes and cache_bytes >= 0, got '
                f'{threshold_bytes}, {subtree_bytes} and {cache_bytes}.'
            )
        self.store = StoreProvider.coerce(store)
        self.scope = scope
        self.threshold_bytes = threshold_bytes
        self.subtree_bytes = subtree_bytes
        self._cache: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self._cache_bytes = cache_bytes
        self._cached_bytes = 0
        self._stored_at: dict[str, float] = {}
        """When each cached body was last written to or read from the store (`time.monotonic`)."""

    async def _bodies(self) -> BodyStore:
        store = await self.store.get()
        if not hasattr(store, 'put_bodies'):
            raise RecallError(f'{type(store).__name__} cannot hold message bodies for RecallDataCodec.')
        return store  # type: ignore[return-value]

    async def aclose(self) -> None:
        """Close the store this codec opened from a URL (a worker's shutdown, or a test's end)."""
        await self.store.aclose()

    def _remember(self, digest: str, value: Any, size: int) -> None:
        """Cache a body that is known to be in the store, evicting the least recently used ones."""
        previous = self._cache.pop(digest, None)
        if previous is not None:
            self._cached_bytes -= previous[1]
        self._cache[digest] = (value, size)
        self._stored_at[digest] = time.monotonic()
        self._cached_bytes += size
        while self._cached_bytes > self._cache_bytes and len(self._cache) > 1:
            gone, (_, evicted) = self._cache.popitem(last=False)
            del self._stored_at[gone]
            self._cached_bytes -= evicted

    def _touch(self, digest: str) -> bool:
        if digest in self._cache:
            self._cache.move_to_end(digest)
            return True
        return False

    def _stored_long_ago(self, digest: str) -> bool:
        """Whether a cached body was last written or read longer than `BODY_TOUCH_INTERVAL` ago.

        A payload that references it is then written to the store again (which only touches it), so
        the store's last-use time of every body a new history references stays recent: that time is
        what `prune_bodies` goes by, and a body cached for weeks is still in use.
        """
        return time.monotonic() - self._stored_at[digest] >= BODY_TOUCH_INTERVAL.total_seconds()

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        encoded: list[Payload] = []
        pending: dict[str, bytes] = {}
        for index, payload in enumerate(payloads):
            if len(payload.data) < self.threshold_bytes or payload.metadata.get('encoding') != b'json/plain':
                encoded.append(payload)
                continue
            walk = Addresser(self.subtree_bytes)
            try:
                root = walk.address(json.loads(payload.data))
                data = dump(root)
            except ReservedKey:
                encoded.append(payload)
                continue
            except (ValueError, RecursionError) as error:  # JSON, UTF-8 and surrogate errors are ValueErrors
                raise UnencodablePayload(index, error) from None
            if not walk.bodies:
                encoded.append(payload)
                continue
            for digest, body in walk.bodies.items():
                if not self._touch(digest) or self._stored_long_ago(digest):
                    pending[digest] = body
            metadata = dict(payload.metadata)
            metadata[_ORIGINAL_ENCODING] = metadata['encoding']
            metadata['encoding'] = ENCODING
            encoded.append(Payload(metadata=metadata, data=data))
        if pending:
            store = await self._bodies()
            size = sum(map(len, pending.values()))
            with span(CODEC_STORE, scoped=self.scope is not None, bodies=len(pending), bytes=size):
                await store.put_bodies(self.scope, pending)
            for digest, body in pending.items():
                self._remember(digest, json.loads(body), len(body))
        return encoded

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        parsed: list[Any] = []
        wanted: set[str] = set()
        for payload in payloads:
            if payload.metadata.get('encoding') != ENCODING:
                parsed.append(None)
                continue
            value = json.loads(payload.data)
            wanted |= checked_references(value)
            parsed.append(value)
        needed = await self._fetch(wanted)
        decoded: list[Payload] = []
        for payload, value in zip(payloads, parsed, strict=True):
            if value is None:
                decoded.append(payload)
                continue
            metadata = dict(payload.metadata)
            metadata['encoding'] = metadata.pop(_ORIGINAL_ENCODING)
            decoded.append(Payload(metadata=metadata, data=dump(restore(value, needed))))
        return decoded

    async def _fetch(self, wanted: set[str]) -> OrderedDict[str, tuple[Any, int]]:
        """Every body reachable from `wanted`, one batched store read per level of nesting.

        Returns the bodies by hash, held independently of the cache so an eviction in the middle
        of a large decode cannot lose one.
        """
        found: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        for _ in range(_MAX_DEPTH):
            missing: list[str] = []
            nested: set[str] = set()
            for digest in wanted - found.keys():
                if self._touch(digest):
                    found[digest] = self._cache[digest]
                    references_in(found[digest][0], nested)
                else:
                    missing.append(digest)
            if missing:
                store = await self._bodies()
                with span(CODEC_FETCH, scoped=self.scope is not None, bodies=len(missing)) as current:
                    fetched = await store.get_bodies(self.scope, missing)
                    note(current, found=len(fetched), bytes=sum(map(len, fetched.values())))
                for digest in missing:
                    body = self._verified(digest, fetched.get(digest))
                    value = json.loads(body)
                    found[digest] = (value, len(body))
                    self._remember(digest, value, len(body))
                    references_in(value, nested)
            wanted = nested - found.keys()
            if not wanted:
                return found
        raise MissingMessageBody(f'References nest deeper than {_MAX_DEPTH} levels in scope {self.scope!r}.')

    def _verified(self, digest: str, body: bytes | None) -> bytes:
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
        return body


def payload_references(payload: Payload) -> set[str]:
    """The bodies a payload `RecallDataCodec` encoded names at its top level; none for any other payload.

    What a reader of every scope (the codec server's operator token) looks up to learn which scope
    wrote a payload, before it decodes the payload in that scope.

    Raises:
        MissingMessageBody: A reference that is not a SHA-256 hex digest.
        ValueError: The payload is not the JSON this codec writes.
    """
    if payload.metadata.get('encoding') != ENCODING:
        return set()
    return checked_references(json.loads(payload.data))


class _CodecRequired(PayloadCodec):
    """Where no codec is set: a payload `RecallDataCodec` encoded fails naming the plugin it needs.

    Without it, the payload converter meets an encoding it does not know and raises `KeyError:
    'Unknown payload encoding binary/temporal-recall-refs'`, which says nothing of the fix.
    """

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        if any(payload.metadata.get('encoding') == ENCODING for payload in payloads):
            raise ConfigurationError(
                'This history holds payloads that message_codec_plugin moved to the store (encoding '
                f'{ENCODING.decode()}), and no message_codec_plugin is configured: replay it with '
                "plugins=[message_codec_plugin(store_url)] (the store the workers' codec wrote to)."
            )
        return list(payloads)


def codec_required(converter: DataConverter | None) -> DataConverter:
    """`converter`, with a codec that names `message_codec_plugin` if it has no codec of its own."""
    base = converter or DataConverter()
    return base if base.payload_codec is not None else dataclasses.replace(base, payload_codec=_CodecRequired())


def message_codec_plugin(
    store: str | StoreProvider | Any,
    *,
    scope: str | None = None,
    threshold_bytes: int = 512,
    subtree_bytes: int = 256,
) -> MessageCodecPlugin:
    """One line to opt in: pass the result in `plugins=[...]` of the client (and so its workers) and the Replayer."""
    codec = RecallDataCodec(store, scope=scope, threshold_bytes=threshold_bytes, subtree_bytes=subtree_bytes)
    plugin = MessageCodecPlugin('temporal-recall.message-codec', codec=codec)

    def with_codec(converter: DataConverter | None) -> DataConverter:
        base = converter or DataConverter()
        existing = base.payload_codec
        if existing is not None and existing is not codec and not isinstance(existing, _CodecRequired):
            raise RecallError('The data converter already has a payload codec; RecallDataCodec must be the only one.')
        return dataclasses.replace(base, payload_codec=codec)

    plugin.data_converter = with_codec
    return plugin


class MessageCodecPlugin(SimplePlugin):
    """A `SimplePlugin` that also exposes its codec, so its owner can close the codec's store."""

    def __init__(self, name: str, *, codec: RecallDataCodec) -> None:
        super().__init__(name)  # pyright: ignore[reportUnknownMemberType]
        self.codec = codec
