"""The driver protocol: what a backend implements so the engine's write rules run on it.

The engine (`_append`, `_write`) holds every rule; a driver holds only the statements, in the
backend's SQL, run inside a transaction the backend opened (SQLite: `BEGIN IMMEDIATE`, the whole
transaction on the connection thread; PostgreSQL: a READ COMMITTED transaction that locks the
conversation row first). A new backend implements `WriteDriver` once (see `_sqlite_write` and
`_postgres_write`) and calls `_append.apply` / `_write.apply` inside its transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from pydantic_ai.conversation_store import ConversationConflict, ConversationEntry

from ._rows import ConversationRow, Member
from ._serialization import PreparedMessage, RecordColumns

__all__ = ('WriteDriver',)


class WriteDriver(Protocol):
    """The statements of one write transaction (an append or a `write_record`), already open."""

    async def conversation(self, conversation_id: str, idempotency_key: str | None) -> ConversationRow | None:
        """The conversation's row (locked until the transaction ends, where the backend locks rows),
        with what `idempotency_key` recorded if it was applied; `None` if there is no such conversation."""
        ...

    async def highest_attempt(self, conv_key: int, fence_key: str) -> int | None: ...

    async def raise_fence(self, conv_key: int, fence_key: str, attempt: int) -> None:
        """Record `attempt` for `fence_key` unless a higher one is recorded."""
        ...

    async def tenant_of(self, scope: str | None) -> int: ...

    async def lock_tenants(self, tenant_ids: Sequence[int]) -> None:
        """Serialise index writers of these tenants, where the backend lets several write at once."""
        ...

    async def head_chain(self, head_key: int, min_position: int) -> list[tuple[int, int, bytes]]:
        """`(entry_key, position, content_hash)` of the head's chain from `min_position` on."""
        ...

    async def max_entry_key(self) -> int: ...

    async def insert_chain(
        self, items: Sequence[PreparedMessage], ids: Sequence[str], parent_key: int | None, parent_position: int
    ) -> list[Member]:
        """Insert `items` (with entry ids `ids`) as a chain after `parent_key`; the members they add."""
        ...

    async def insert_conversation(
        self, columns: RecordColumns, *, tenant_id: int, head_key: int | None, created_seq: int
    ) -> int: ...

    async def write_branches(self, conv_key: int, branch_keys: Sequence[int]) -> None: ...

    async def move_head(
        self, conv_key: int, *, head_key: int | None, usage: str, revision: str, updated_at: str, updated_order: int
    ) -> None: ...

    async def add_members(self, conv_key: int, tenant_id: int, members: Sequence[Member]) -> None: ...

    async def record_applied(
        self, conv_key: int, idempotency_key: str, *, head_key: int | None, length: int, stored: int
    ) -> None: ...

    async def entry_keys(self, entry_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
        """`entry_id -> (entry_key, position)` of the stored entries among `entry_ids`."""
        ...

    async def insert_entries(
        self,
        entries: Sequence[ConversationEntry],
        prepared: Sequence[PreparedMessage],
        conflict: ConversationConflict,
    ) -> dict[str, Member]:
        """Insert the entries not stored yet, in order; the index members they would add, by entry id.

        Entry ids are immutable: a stored one is never rewritten. A parent that is not stored was
        released by a concurrent delete: raise `conflict`."""
        ...

    async def update_conversation(
        self, conv_key: int, columns: RecordColumns, *, tenant_id: int, head_key: int | None
    ) -> None: ...

    async def restart_membership(self, conv_key: int, created_seq: int) -> None:
        """Drop the conversation's membership (and documents only it held), as if created at `created_seq`."""
        ...

    async def index_conversation(self, conv_key: int, tenant_id: int, known: Mapping[int, Member]) -> None:
        """Index everything the conversation reaches (`known`: members written by this transaction)."""
        ...
