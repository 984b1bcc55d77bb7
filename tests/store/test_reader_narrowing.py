"""A conversation's search reads only the blocks that can hold its documents: its cost follows the
conversation, not the length of a common term's list across the tenant."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pydantic_ai.conversation import Conversation

from temporal_recall.store import SearchTarget
from temporal_recall.store.index import _reader
from temporal_recall.store.postings import _blocks

from ._support import AnyStore, postings_of, user


async def test_a_small_conversation_reads_the_blocks_around_its_documents(
    recall_store: AnyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_blocks, 'BLOCK', 4)
    monkeypatch.setattr(_reader, 'BLOCK', 4)
    for number in range(6):
        shipped = [user(f'order A-{number}-{n} shipped') for n in range(8)]
        await recall_store.save(Conversation(conversation_id=f'busy-{number}', messages=shipped))
    await recall_store.save(Conversation(conversation_id='small', messages=[user('order A-1 is late')]))
    reads: list[tuple[str, Any]] = []
    for name in ('read_blocks', 'read_overlapping'):
        real = getattr(_reader, name)

        async def spy(
            session: Any, tenant_id: int, keys: Sequence[Any], *rest: Any, _real: Any = real, _name: str = name
        ):
            reads.append((_name, list(keys)))
            return await _real(session, tenant_id, keys, *rest)

        monkeypatch.setattr(_reader, name, spy)
    found = await postings_of(recall_store, SearchTarget(scope=None, conversation_id='small'), ['order', 'late'])
    assert [posting.doc_id for posting in found['order']] == [posting.doc_id for posting in found['late']]
    assert len(found['order']) == 1
    # 'order' is in 49 documents (13 blocks of 4): only the range around the conversation's one document
    # is read; 'late', in one block, is read whole (a range over every id). One statement reads both.
    assert [name for name, _ in reads] == ['read_overlapping']
    ranges = sorted(reads[0][1], key=lambda key: key[1])
    doc_id = found['order'][0].doc_id
    assert [(low, high) for _, low, high in ranges] == [(0, _reader._EVERY_ID), (doc_id, doc_id)]  # pyright: ignore[reportPrivateUsage]
    reads.clear()
    whole = await postings_of(recall_store, SearchTarget(scope=None, conversation_id=None), ['order'])
    assert len(whole['order']) == 49 and [name for name, _ in reads] == ['read_blocks']


async def test_a_conversation_holding_the_whole_tenant_reads_no_membership(
    recall_store: AnyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await recall_store.save(Conversation(conversation_id='only', messages=[user(f'order {n}') for n in range(5)]))
    members_read = False
    real = _reader._documents_of  # pyright: ignore[reportPrivateUsage]

    async def spy(session: Any, resolved: _reader.Target) -> Any:
        nonlocal members_read
        found = await real(session, resolved)
        members_read = found is not None
        return found

    monkeypatch.setattr(_reader, '_documents_of', spy)
    found = await postings_of(recall_store, SearchTarget(scope=None, conversation_id='only'), ['order'])
    assert len(found['order']) == 5 and not members_read
