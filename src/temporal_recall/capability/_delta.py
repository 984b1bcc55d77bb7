"""Working out, in workflow code, what a step boundary must send to the store.

Most steps are written by their own model-request activity (`_persisting_model`, `_step_write`); this is for the
rest, which the capability writes from workflow code through `store_step` (an output tool's return,
a run failing after tool calls, histories recorded before in-activity writes), and for tracking
what the activities stored. The capability runs its hooks inside the workflow, where no I/O is
allowed, so it cannot ask the store what it lacks. It remembers instead what it has already sent during this run,
and at each boundary sends only the messages after the longest prefix it knows is stored, plus where
they attach (how many messages precede them and the content hash of the last one). That keeps the
bytes persistence adds to Temporal history proportional to what the conversation gained, not to
its length.

Messages are compared by identity first (the common case: the same objects stay in the run's
history between steps) and by content hash otherwise, so a history a capability rebuilt with equal
messages is still recognised, while one it rewrote becomes a branch at the first difference.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic_ai.messages import ModelMessage

from ..content import canonical_json

__all__ = ('Delta', 'DeltaTracker')


@dataclass(frozen=True, kw_only=True)
class Delta:
    """The messages one boundary adds, and the point of the history they follow."""

    base_length: int
    base_hash: str | None
    messages: list[ModelMessage]


@dataclass
class DeltaTracker:
    """Per-run memory of which messages of the run's history the store already has."""

    _stored: list[ModelMessage] = field(default_factory=list[ModelMessage])
    _facts: dict[int, tuple[ModelMessage, str, int]] = field(default_factory=dict[int, tuple[ModelMessage, str, int]])

    def _fact(self, message: ModelMessage) -> tuple[ModelMessage, str, int]:
        # Keyed by id() with the message kept alive beside its facts, so an id cannot be reused by
        # another object while its entry exists.
        cached = self._facts.get(id(message))
        if cached is not None and cached[0] is message:
            return cached
        canonical = canonical_json(message).encode()
        fact = (message, hashlib.sha256(canonical).hexdigest(), len(canonical))
        self._facts[id(message)] = fact
        return fact

    def hash_of(self, message: ModelMessage) -> str:
        return self._fact(message)[1]

    def size_of(self, message: ModelMessage) -> int:
        """Roughly the message's serialized size (its canonical JSON), to keep payloads bounded."""
        return self._fact(message)[2]

    def split(self, delta: Delta, budget: int) -> list[Delta]:
        """`delta` as consecutive deltas of at most `budget` bytes each (one message may exceed it alone)."""
        chunks: list[Delta] = []
        start, size = 0, 0
        for index, message in enumerate(delta.messages):
            message_size = self.size_of(message)
            if index > start and size + message_size > budget:
                chunks.append(self._chunk(delta, start, index))
                start, size = index, 0
            size += message_size
        chunks.append(self._chunk(delta, start, len(delta.messages)))
        return chunks

    def _chunk(self, delta: Delta, start: int, end: int) -> Delta:
        if start == 0:
            return Delta(base_length=delta.base_length, base_hash=delta.base_hash, messages=delta.messages[start:end])
        return Delta(
            base_length=delta.base_length + start,
            base_hash=self.hash_of(delta.messages[start - 1]),
            messages=delta.messages[start:end],
        )

    def _shared_prefix(self, history: Sequence[ModelMessage]) -> int:
        shared = 0
        for stored, current in zip(self._stored, history, strict=False):
            if stored is not current and self.hash_of(stored) != self.hash_of(current):
                break
            shared += 1
        return shared

    def pending(self, history: Sequence[ModelMessage]) -> Delta | None:
        """What `history` adds to what was stored, or `None` when the store already has all of it."""
        shared = self._shared_prefix(history)
        if shared == len(history) and shared == len(self._stored):
            return None
        if shared == len(history):
            # The history was cut back to a prefix of what is stored, with nothing new: the store
            # keeps the longer history, and there is nothing to send.
            return None
        return Delta(
            base_length=shared,
            base_hash=self.hash_of(history[shared - 1]) if shared else None,
            messages=list(history[shared:]),
        )

    @property
    def stored_length(self) -> int:
        """How many messages of the run's history the store is known to hold."""
        return len(self._stored)

    def assume_stored(self, history: Sequence[ModelMessage]) -> None:
        """Record that the store holds `history` (loaded from it, or just written)."""
        self._stored = list(history)

    def full(self, history: Sequence[ModelMessage]) -> Delta:
        """A delta carrying the whole history, for when the store could not attach a smaller one."""
        return Delta(base_length=0, base_hash=None, messages=list(history))
