"""Messages, store factories and index checks shared by the store tests."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncGenerator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, closing
from datetime import UTC, datetime
from pathlib import Path

from pydantic_ai import messages as m
from pydantic_ai.conversation_store import ConversationStore, InMemoryConversationStore

from temporal_recall.content import content_hash
from temporal_recall.store import SqliteConversationStore

StoreFactory = Callable[[Path], AbstractAsyncContextManager[ConversationStore]]


@asynccontextmanager
async def _memory(_: Path) -> AsyncGenerator[ConversationStore]:
    yield InMemoryConversationStore()


@asynccontextmanager
async def _sqlite(folder: Path) -> AsyncGenerator[ConversationStore]:
    store = await SqliteConversationStore.open(folder / 'store.db')
    try:
        yield store
    finally:
        await store.close()


STORE_FACTORIES: dict[str, StoreFactory] = {'memory': _memory, 'sqlite': _sqlite}
"""Every backend the conformance suite runs against, `memory` being the reference. A PostgreSQL
backend joins by adding an entry (skipping when its server is not configured)."""

REFERENCE = 'memory'


AT = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
"""Every helper message is stamped with this, so building the same message twice gives equal messages."""


def user(text: str, *, at: datetime = AT) -> m.ModelRequest:
    return m.ModelRequest(parts=[m.UserPromptPart(text, timestamp=at)], timestamp=at)


def reply(text: str, *, at: datetime = AT) -> m.ModelResponse:
    return m.ModelResponse(parts=[m.TextPart(text)], model_name='test', timestamp=at)


def tool_call(name: str, args: dict[str, object], call_id: str) -> m.ModelResponse:
    return m.ModelResponse(parts=[m.ToolCallPart(name, args, tool_call_id=call_id)], model_name='test', timestamp=AT)


def tool_return(name: str, content: object, call_id: str) -> m.ModelRequest:
    return m.ModelRequest(parts=[m.ToolReturnPart(name, content, tool_call_id=call_id, timestamp=AT)], timestamp=AT)


def summary(text: str) -> m.ModelRequest:
    return m.ModelRequest(parts=[m.CompactionPart(content=text)], timestamp=AT)


def turn(n: int, topic: str = 'weather') -> list[m.ModelMessage]:
    """A user prompt and a reply, with words that identify the turn."""
    return [user(f'question {n} about the {topic} please'), reply(f'answer {n} regarding {topic} follows')]


def hex_hash(message: m.ModelMessage) -> str:
    return content_hash(message)


def index_problems(path: Path) -> list[str]:
    """Every way the index disagrees with itself or the log (an empty list when consistent)."""
    problems: list[str] = []
    with closing(sqlite3.connect(path)) as db:
        rows = db.execute(
            'SELECT c.conversation_id, c.document_count, c.total_length, count(cd.doc_id), coalesce(sum(d.length), 0) '
            'FROM conversations c LEFT JOIN conversation_documents cd ON cd.conv_key = c.conv_key '
            'LEFT JOIN documents d ON d.doc_id = cd.doc_id GROUP BY c.conv_key'
        ).fetchall()
        for conversation_id, count, length, real_count, real_length in rows:
            if (count, length) != (real_count, real_length):
                problems.append(f'{conversation_id}: counters {count}/{length}, membership {real_count}/{real_length}')
        for tenant, count, length, real_count, real_length in db.execute(
            'SELECT t.scope_key, t.document_count, t.total_length, count(d.doc_id), coalesce(sum(d.length), 0) '
            'FROM tenants t LEFT JOIN documents d ON d.tenant_id = t.tenant_id GROUP BY t.tenant_id'
        ):
            if (count, length) != (real_count, real_length):
                problems.append(f'tenant {tenant}: counters {count}/{length}, documents {real_count}/{real_length}')
        for doc_id, refs, real in db.execute(
            'SELECT d.doc_id, d.refs, (SELECT count(*) FROM conversation_documents cd WHERE cd.doc_id = d.doc_id) '
            'FROM documents d'
        ):
            if refs != real or refs == 0:
                problems.append(f'document {doc_id}: refs {refs}, memberships {real}')
        orphans = db.execute(
            'SELECT count(*) FROM postings p WHERE NOT EXISTS '
            '(SELECT 1 FROM documents d WHERE d.doc_id = p.doc_id AND d.tenant_id = p.tenant_id)'
        ).fetchone()[0]
        if orphans:
            problems.append(f'{orphans} postings without their document')
        dangling = db.execute(
            'SELECT count(*) FROM conversation_documents cd WHERE NOT EXISTS '
            '(SELECT 1 FROM documents d WHERE d.doc_id = cd.doc_id) '
            'OR NOT EXISTS (SELECT 1 FROM entries e WHERE e.entry_key = cd.entry_key)'
        ).fetchone()[0]
        if dangling:
            problems.append(f'{dangling} memberships without their document or entry')
        wrong_length = db.execute(
            'SELECT count(*) FROM postings p JOIN documents d ON d.doc_id = p.doc_id WHERE p.length != d.length'
        ).fetchone()[0]
        if wrong_length:
            problems.append(f'{wrong_length} postings with a stale length')
    return problems


def table_counts(path: Path) -> dict[str, int]:
    tables = ('conversations', 'entries', 'documents', 'postings', 'conversation_documents', 'terms', 'applied_writes')
    with closing(sqlite3.connect(path)) as db:
        return {table: db.execute(f'SELECT count(*) FROM {table}').fetchone()[0] for table in tables}
