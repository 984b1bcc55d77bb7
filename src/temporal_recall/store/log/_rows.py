"""The rows the engine and the drivers pass between them, whatever the backend.

`ConversationRow` is a conversation as a write transaction reads it; `ChainEntry` an entry of its
head's chain.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = ('ChainEntry', 'ConversationRow')


class ChainEntry(NamedTuple):
    """An entry of a head's chain, as `_entries.head_chain` reads it."""

    entry_key: int
    position: int
    content_hash: bytes


@dataclass(frozen=True, kw_only=True)
class ConversationRow:
    conv_key: int
    tenant_id: int
    scope: str | None
    head_key: int | None
    head_id: str | None
    head_position: int
    """-1 for a conversation without messages."""
    revision: str
    usage: str
    branch_keys: list[int]
    applied: tuple[str | None, int] | None = None
    """`(head entry id, length)` recorded for the idempotency key asked about, if it was applied."""
    fence_attempt: int | None = None
    """The highest attempt recorded for the fence key asked about, if any."""
    chain: list[ChainEntry] | None = None
    """The head's chain from the position asked about, oldest first, where the read folded it in
    (`_entries.conversation_row`); otherwise `None`."""
    known_runs: dict[str, int] = field(default_factory=dict[str, int])
    """Run keys the read took along (`_entries.conversation_row`), for `_bulk.intern`."""
    known_terms: dict[str, int] = field(default_factory=dict[str, int])
    """Term ids the read took along (`_entries.conversation_row`), for `_bulk.intern`."""
