"""Several connections writing one store: revisions and write locks keep every message exactly once.

SQLite serialises writers with `BEGIN IMMEDIATE`; PostgreSQL runs them side by side under row locks,
with several pooled connections per store, so the same races are real races there.
"""

from __future__ import annotations

import asyncio
import random
from contextlib import AsyncExitStack

import pytest
from pydantic_ai import messages as m
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict

from temporal_recall.errors import HistoryMismatch
from temporal_recall.store import AppendRequest

from ._support import AnyStore, Site, hex_hash, problems_of, row_counts, turn, user


async def open_many(stack: AsyncExitStack, site: Site, count: int) -> list[AnyStore]:
    return [await stack.enter_async_context(await site.open()) for _ in range(count)]


async def test_two_writers_of_one_loaded_conversation_one_wins(site: Site) -> None:
    async with AsyncExitStack() as stack:
        first, second = await open_many(stack, site, 2)
        await first.save(Conversation(messages=turn(1), conversation_id='c'))
        mine = await first.load('c')
        theirs = await second.load('c')
        assert mine is not None and theirs is not None
        mine.messages.append(user('mine'))
        theirs.messages.append(user('theirs'))
        outcomes = await asyncio.gather(first.save(mine), second.save(theirs), return_exceptions=True)
        assert sorted(type(outcome).__name__ for outcome in outcomes) == ['ConversationConflict', 'list']
        winner = user('mine') if isinstance(outcomes[1], ConversationConflict) else user('theirs')
        loaded = await first.load('c')
        assert loaded is not None and loaded.messages == [*turn(1), winner]
        assert (await row_counts(first))['entries'] == 3


async def test_twenty_conversations_saved_concurrently(site: Site) -> None:
    async with AsyncExitStack() as stack:
        stores = await open_many(stack, site, 4)

        async def converse(index: int) -> None:
            store = stores[index % len(stores)]
            conversation = Conversation(conversation_id=f'c{index}')
            for step in range(5):
                conversation.messages.extend(turn(step, f'topic{index}'))
                await store.save(conversation)
                await asyncio.sleep(0)

        await asyncio.gather(*(converse(index) for index in range(20)))
        for index in range(20):
            loaded = await stores[0].load(f'c{index}')
            assert loaded is not None
            assert loaded.messages == [message for step in range(5) for message in turn(step, f'topic{index}')]
        assert (await row_counts(stores[0]))['entries'] == 20 * 10
        assert await problems_of(stores[0]) == []


@pytest.mark.parametrize('resend', [False, True], ids=['deltas', 'full-resends'])
async def test_concurrent_appends_to_one_conversation_store_each_message_once(site: Site, resend: bool) -> None:
    """Senders race to push every boundary of one history, duplicated, out of order, some without their key.

    A delta that arrives early gets `HistoryMismatch` and retries; one that arrives late is replayed by its
    key or, with its key lost, matched by content hash. A full resend of a shorter history never rewinds.
    """
    history: list[m.ModelMessage] = [message for step in range(12) for message in turn(step)]
    boundaries = [(start, start + 2) for start in range(0, len(history), 2)]
    rng = random.Random(7)

    async with AsyncExitStack() as stack:
        stores = await open_many(stack, site, 3)

        async def push(start: int, end: int, sender: int) -> None:
            store = stores[sender % len(stores)]
            key = f'boundary-{start}' if sender % 3 else f'boundary-{start}-lost-key-{sender}'
            while True:
                if resend:
                    request = AppendRequest(
                        conversation_id='c',
                        scope=None,
                        idempotency_key=key,
                        base_length=0,
                        base_hash=None,
                        messages=history[:end],
                    )
                else:
                    request = AppendRequest(
                        conversation_id='c',
                        scope=None,
                        idempotency_key=key,
                        base_length=start,
                        base_hash=hex_hash(history[start - 1]) if start else None,
                        messages=history[start:end],
                    )
                try:
                    await store.append(request)
                    return
                except HistoryMismatch:
                    await asyncio.sleep(0.001)  # an earlier boundary has not landed yet

        senders = [(start, end, sender) for start, end in boundaries for sender in range(3)]
        rng.shuffle(senders)
        await asyncio.gather(*(push(*sender) for sender in senders))
        loaded = await stores[0].load('c')
        assert loaded is not None and loaded.messages == history
        record = await stores[0].read_record('c')
        assert record is not None and record.branches == []
        assert (await row_counts(stores[0]))['entries'] == len(history)
        assert await problems_of(stores[0]) == []
