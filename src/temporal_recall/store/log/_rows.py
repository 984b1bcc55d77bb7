"""The rows the engine and the drivers pass between them, whatever the backend.

`ConversationRow` is a conversation as a write transaction reads it; `Member` an entry joining a
conversation's index membership.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ('ConversationRow',)


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
