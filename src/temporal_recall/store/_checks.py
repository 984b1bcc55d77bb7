"""The stores' side of input validation: what each primitive checks before its driver sees anything.

Every public `ConversationStore` method (`load`, `save`, `fork`, `delete`, …) goes through the
primitives (`read_record`, `write_record`, …), and the delta writer and the search go through
`append` and `index_stats`, so checking there covers the whole Python API of both backends. The
rule itself is `temporal_recall._validation.check_id`, the same one the models and the HTTP API use.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_ai.conversation_store import ConversationEntry, ConversationRecord

from .._validation import check_id, check_optional_id
from ._protocol import AppendRequest, SearchTarget

__all__ = ('check_append', 'check_id', 'check_optional_id', 'check_record', 'check_target')


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
