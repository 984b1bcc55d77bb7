"""The reader's SQLite plan choice: a search's cost follows its conversation, not the whole tenant."""

from __future__ import annotations

from pathlib import Path

from pydantic_ai.conversation import Conversation

from temporal_recall.store import SearchTarget, SqliteConversationStore
from temporal_recall.store import _reader as reader
from temporal_recall.store._session import Session

from ._support import user


async def _plan_for(store: SqliteConversationStore, conversation_id: str) -> str:
    async def plan(session: Session) -> str:
        resolved = await reader.resolve(session, SearchTarget(scope=None, conversation_id=conversation_id, run_id=None))
        assert resolved is not None
        sql, _ = reader._postings_per_term_sql(resolved)  # pyright: ignore[reportPrivateUsage]
        return sql

    return await store._db.run_read(plan)  # pyright: ignore[reportPrivateUsage]


async def test_a_small_conversation_is_read_from_its_members_a_large_one_from_the_postings(tmp_path: Path) -> None:
    store = await SqliteConversationStore.open(tmp_path / 'plan.db')
    try:
        await store.save(Conversation(conversation_id='small', messages=[user('order A-1 is late')]))
        shipped = [user(f'order A-{n} shipped') for n in range(9)]
        await store.save(Conversation(conversation_id='large', messages=shipped))
        # 1 of the tenant's 10 documents: probe each member's postings instead of a term's whole list.
        assert 'FROM conversation_documents cd CROSS JOIN postings' in await _plan_for(store, 'small')
        # 9 of 10: walking a term's postings is the shorter way.
        assert 'FROM postings p JOIN conversation_documents' in await _plan_for(store, 'large')
    finally:
        await store.close()
