"""The stores' side of input validation: what each primitive checks before its driver sees anything.
More in docs/design/store.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationEntry, ConversationRecord, ConversationStore

from .._validation import check_id, check_optional_id
from .protocol import AppendRequest, SearchTarget

__all__ = ('CheckedStore', 'check_append', 'check_id', 'check_optional_id', 'check_record', 'check_target')


def check_record(record: ConversationRecord, new_entries: Sequence[ConversationEntry] = ()) -> None:
    """Raise `InvalidIdentifier` if any id of `record` or `new_entries` could not be an id."""
    check_id(record.conversation_id, 'conversation id')
    check_optional_id(record.scope, 'scope')
    check_optional_id(record.forked_from, 'forked_from conversation id')
    for entry_id in (record.head_id, record.forked_at, *record.branches):
        check_optional_id(entry_id, 'entry id')
    for entry in new_entries:
        check_id(entry.id, 'entry id')
        check_optional_id(entry.parent_id, 'entry id')


def check_append(request: AppendRequest) -> None:
    """Raise `InvalidIdentifier` if the conversation id, scope or run id of `request` could not be an id."""
    check_id(request.conversation_id, 'conversation id')
    check_optional_id(request.scope, 'scope')
    check_optional_id(request.run_id, 'run id')


def check_target(target: SearchTarget) -> None:
    """Raise `InvalidIdentifier` if the conversation id, scope or run id of `target` could not be an id."""
    check_optional_id(target.conversation_id, 'conversation id')
    check_optional_id(target.scope, 'scope')
    check_optional_id(target.run_id, 'run id')


class CheckedStore(ConversationStore):
    """pydantic-ai's `ConversationStore`, refusing bad ids in the arguments no primitive sees."""

    async def load(
        self, conversation_id: str, *, limit: int | None = None, scope: str | None = None
    ) -> Conversation | None:
        check_optional_id(scope, 'scope')
        return await super().load(conversation_id, limit=limit, scope=scope)

    async def load_entries(
        self, conversation_id: str, *, limit: int | None = None, scope: str | None = None
    ) -> list[ConversationEntry] | None:
        check_optional_id(scope, 'scope')
        return await super().load_entries(conversation_id, limit=limit, scope=scope)

    async def fork(
        self,
        conversation_id: str,
        *,
        at: int | None = None,
        from_entry: str | None = None,
        new_conversation_id: str | None = None,
        scope: str | None = None,
        source_scope: str | None = None,
    ) -> Conversation:
        check_id(conversation_id, 'conversation id')
        check_optional_id(new_conversation_id, 'conversation id')
        check_optional_id(from_entry, 'entry id')
        check_optional_id(scope, 'scope')
        check_optional_id(source_scope, 'scope')
        return await super().fork(
            conversation_id,
            at=at,
            from_entry=from_entry,
            new_conversation_id=new_conversation_id,
            scope=scope,
            source_scope=source_scope,
        )

    async def branch(
        self,
        conversation_id: str,
        *,
        at: int | None = None,
        from_entry: str | None = None,
        expected_revision: str | None,
        scope: str | None = None,
    ) -> Conversation:
        check_optional_id(from_entry, 'entry id')
        check_optional_id(scope, 'scope')
        return await super().branch(
            conversation_id, at=at, from_entry=from_entry, expected_revision=expected_revision, scope=scope
        )

    async def delete(self, conversation_id: str, *, scope: str | None = None) -> None:
        check_optional_id(scope, 'scope')
        await super().delete(conversation_id, scope=scope)
