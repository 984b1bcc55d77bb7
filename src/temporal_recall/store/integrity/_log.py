"""The log's checks: entries and their chains, conversations, message bodies. More in docs/design/store.md."""

from __future__ import annotations

import hashlib
import json

from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart

from temporal_recall._body_references import references_in
from temporal_recall.content import content_hash, form_1_hashes, load_message
from temporal_recall.errors import MessageNotSerializable

from ..sql._keys import hash_bytes, scope_key
from ..sql._session import Session
from ._report import CheckReport, stored_bytes

__all__ = ('check_bodies', 'check_conversations', 'check_entries')

_PAGE = 1000
"""Entries read per query, so checking a large log never holds all of it at once."""


async def check_entries(session: Session, report: CheckReport) -> None:
    after = 0
    while True:
        rows = await session.rows(
            'SELECT e.entry_key, e.entry_id, e.parent_key, e.position, p.entry_key, p.position, e.content_hash, '
            'e.message FROM entries e LEFT JOIN entries p ON p.entry_key = e.parent_key '
            'WHERE e.entry_key > $1 ORDER BY e.entry_key LIMIT $2',
            after,
            _PAGE,
        )
        for _, entry_id, parent_key, position, found_parent, parent_position, stored_hash, message in rows:
            where = f'entry {entry_id!r}'
            if parent_key is None:
                if position != 0:
                    report.add('chain', where, f'has no parent but position {position}, not 0')
            elif found_parent is None:
                report.add('chain', where, f'names parent key {parent_key}, which is not stored')
            elif position != parent_position + 1:
                report.add('chain', where, f'is at position {position} under a parent at {parent_position}')
            try:
                actual = hash_bytes(content_hash(load_message(message)))
            except (ValueError, MessageNotSerializable) as error:
                report.add('content_hash', where, f'holds a message that cannot be read ({error})')
                continue
            if stored_bytes(stored_hash) != actual:
                report.add('content_hash', where, _hash_finding(stored_bytes(stored_hash), load_message(message)))
        report.entries += len(rows)
        if len(rows) < _PAGE:
            return
        after = rows[-1][0]


async def check_conversations(session: Session, report: CheckReport) -> None:
    rows = await session.rows(
        'SELECT c.conversation_id, c.scope, t.scope_key, c.head_key, h.entry_key FROM conversations c '
        'LEFT JOIN tenants t ON t.tenant_id = c.tenant_id LEFT JOIN entries h ON h.entry_key = c.head_key',
    )
    report.conversations = len(rows)
    for conversation_id, scope, tenant_key, head_key, found_head in rows:
        where = f'conversation {conversation_id!r}'
        if tenant_key != scope_key(scope):
            report.add('scope', where, f'has scope {scope!r} but is filed under tenant {tenant_key!r}')
        if head_key is not None and found_head is None:
            report.add('chain', where, f'has head key {head_key}, which is not stored')
        elif head_key is not None:
            await _check_prompts(session, report, where, int(head_key))
    for conversation_id, entry_key in await session.rows(
        'SELECT c.conversation_id, b.entry_key FROM conversation_branches b '
        'JOIN conversations c ON c.conv_key = b.conv_key LEFT JOIN entries e ON e.entry_key = b.entry_key '
        'WHERE e.entry_key IS NULL',
    ):
        report.add('chain', f'conversation {conversation_id!r}', f'keeps branch key {entry_key}, which is not stored')


_HEAD_HISTORY = """
WITH RECURSIVE chain(k) AS (
    SELECT CAST($1 AS BIGINT)
    UNION ALL
    SELECT e.parent_key FROM chain JOIN entries e ON e.entry_key = chain.k WHERE e.parent_key IS NOT NULL
)
SELECT e.position, e.message FROM chain JOIN entries e ON e.entry_key = chain.k ORDER BY e.position
"""
"""`(position, message)` of the history ending at entry key `$1`, oldest first."""


async def _check_prompts(session: Session, report: CheckReport, where: str, head_key: int) -> None:
    """The current history says nothing twice in a row: prompts with no answer after them, said again
    right after, are a resent turn stored twice (what the model was then sent twice)."""
    unanswered: list[tuple[object, int]] = []
    for position, raw in [*await session.rows(_HEAD_HISTORY, head_key), (-1, None)]:
        try:
            message = None if raw is None else load_message(raw)
        except ValueError:
            continue  # Reported by `check_entries`.
        if isinstance(message, ModelRequest):
            at = int(position)
            unanswered.extend((part.content, at) for part in message.parts if isinstance(part, UserPromptPart))
            continue
        repeat = _repeated(unanswered)
        if repeat is not None:
            first, again = repeat
            report.add(
                'history',
                where,
                f'says {_preview(first[0])} twice in a row (at positions {first[1]} and {again[1]}) with no answer '
                'between: a resent turn stored twice',
            )
            return
        unanswered = []


def _repeated(said: list[tuple[object, int]]) -> tuple[tuple[object, int], tuple[object, int]] | None:
    """The first prompts said again right after themselves: where the first copy and the second begin.

    For each length, a copy `length` long ends where `length` prompts in a row equal those `length` later.
    """
    contents = [content for content, _ in said]
    for length in range(1, len(said) // 2 + 1):
        streak = 0
        for index in range(len(said) - length):
            streak = streak + 1 if contents[index] == contents[index + length] else 0
            if streak == length:
                return said[index + 1 - length], said[index + 1]
    return None


def _preview(content: object) -> str:
    text = content if isinstance(content, str) else str(content)
    return repr(text if len(text) <= 60 else text[:57] + '...')


async def check_bodies(session: Session, report: CheckReport) -> None:
    rows = await session.rows('SELECT scope_key, content_hash, body FROM message_bodies')
    report.bodies = len(rows)
    stored = {(key, digest) for key, digest, _ in rows}
    for key, digest, body in rows:
        where, data = f'message body {digest} (tenant {key!r})', stored_bytes(body)
        if hashlib.sha256(data).hexdigest() != digest:
            report.add('content_hash', where, 'holds bytes with another SHA-256')
            continue
        try:
            value = json.loads(data)
        except ValueError:
            continue  # Not a body the codec wrote (they are all JSON): it references nothing.
        referenced: set[str] = set()
        references_in(value, referenced)
        for missing in sorted(digest for digest in referenced if (key, digest) not in stored):
            report.add('body', where, f'references body {missing}, which the store does not hold in its scope')


def _hash_finding(stored: bytes, message: ModelMessage) -> str:
    """What a stored hash that differs from the message's says: written in canonical form 1 under a
    pydantic-ai release that added fields (harmless: README, "Upgrading pydantic-ai"), or wrong."""
    if stored in {hash_bytes(digest) for digest in form_1_hashes(message)}:
        return (
            'holds a hash in canonical form 1, as a build before form 2 wrote it under a pydantic-ai release '
            'after 2.68; it is still found and attached to, and a message written again gets its form-2 hash'
        )
    return 'holds a message whose hash is not the stored content hash'
