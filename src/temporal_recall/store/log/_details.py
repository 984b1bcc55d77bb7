"""`ConversationStore.write_details`: a conversation's title and metadata, checked and written in one statement.

They live on the conversation's row beside its record, and no save or append writes them, so an
update outlives every later save (pydantic-ai 2.78's contract). The revision and any expected title
are compared in the `UPDATE`'s `WHERE`, so of a save and an update racing, or two updates expecting
the same title, the loser changes nothing and gets `ConversationConflict` (`update` then reads again).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic_ai.conversation_store import ConversationConflict

from temporal_recall.errors import InvalidIdentifier

from ..sql._session import Session

__all__ = ('details_columns', 'write_details')

_FIELDS = ('title', 'metadata')


def details_columns(details: Mapping[str, Any], *, what: str) -> dict[str, str | None]:
    """The column values of `details` (a `ConversationDetails`), refusing what no column holds.

    Raises:
        NotImplementedError: A key this store keeps no column for, as the primitive's contract says.
        InvalidIdentifier: A title that is not text, or metadata that is not a JSON object.
    """
    unknown = sorted(set(details) - set(_FIELDS))
    if unknown:
        raise NotImplementedError(f'This store keeps no {", ".join(unknown)} for a conversation ({what}).')
    columns: dict[str, str | None] = {}
    if 'title' in details:
        title = details['title']
        if title is not None and not isinstance(title, str):
            raise InvalidIdentifier(f'A conversation title must be text or None, not {type(title).__name__}.')
        columns['title'] = title
    if 'metadata' in details:
        metadata = details['metadata']
        if metadata is not None and not isinstance(metadata, dict):
            raise InvalidIdentifier(f'Conversation metadata must be a dict or None, not {type(metadata).__name__}.')
        try:
            columns['metadata'] = None if metadata is None else json.dumps(metadata, ensure_ascii=False)
        except (TypeError, ValueError) as error:
            raise InvalidIdentifier(f'Conversation metadata must be JSON-serializable: {error}.') from None
    return columns


async def write_details(
    session: Session,
    conversation_id: str,
    details: Mapping[str, Any],
    *,
    expected_revision: str,
    expected: Mapping[str, Any],
) -> None:
    """Write `details` if the conversation has `expected_revision` and the `expected` values; else conflict."""
    values = details_columns(details, what='details')
    wanted = details_columns(expected, what='expected')
    params: list[Any] = [conversation_id, expected_revision]
    sets: list[str] = []
    for column, value in values.items():
        params.append(value)
        sets.append(f'{column} = ${len(params)}')
    conditions = ['conversation_id = $1', 'revision = $2']
    for column, value in wanted.items():
        if value is None:
            conditions.append(f'{column} IS NULL')
        else:
            params.append(value)
            conditions.append(f'{column} = ${len(params)}')
    # Columns and conditions are this module's own names; every value is a parameter.
    sql = f'UPDATE conversations SET {", ".join(sets)} WHERE {" AND ".join(conditions)} RETURNING conv_key'  # noqa: S608
    if await session.value(sql, *params) is None:
        raise ConversationConflict(conversation_id)
