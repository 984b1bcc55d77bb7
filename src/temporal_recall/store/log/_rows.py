"""The rows the engine and the drivers pass between them, whatever the backend.

`ConversationRow` is a conversation as a write transaction reads it; `Member` an entry joining a
conversation's index membership.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._columns import PreparedMessage

__all__ = ('ConversationRow', 'Member')


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


@dataclass(frozen=True, kw_only=True)
class Member:
    """An entry about to join a conversation's index membership."""

    entry_key: int
    position: int
    run_key: int | None
    content_hash: bytes
    prepared: PreparedMessage | None = None
    """Set for entries written by this transaction; otherwise the terms are read from the stored message."""
    unindexed: bool = False
    """Stored marked as a summary by the application's own rule (`entries.unindexed`): never indexed."""

    @property
    def kept_out(self) -> bool:
        """Whether the application's summary rule keeps this entry out of the index (read or prepared)."""
        return self.unindexed or (self.prepared is not None and self.prepared.unindexed)
