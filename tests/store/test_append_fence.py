"""Write fences: a late write from an earlier attempt of a retried activity never lands after a later one's."""

from __future__ import annotations

import asyncio

import pytest
from pydantic_ai import messages as m
from pydantic_ai.usage import RunUsage

from temporal_recall.store import Fence

from ._support import AnyStore, Site, reply, row_counts, turn, user
from .test_append import delta, history

PROMPT = user('what is the weather')


async def test_a_later_attempt_supersedes_and_an_earlier_one_is_refused(recall_store: AnyStore) -> None:
    await recall_store.append(delta([PROMPT], key='p', fence=Fence(key='wf/run/1', attempt=1)))
    first = await recall_store.append(
        delta([reply('sunny')], base=[PROMPT], key='r1', fence=Fence(key='wf/run/1', attempt=1))
    )
    assert first.stored == 1 and not first.fenced
    second = await recall_store.append(
        delta([reply('rainy')], base=[PROMPT], key='r2', fence=Fence(key='wf/run/1', attempt=2))
    )
    assert second.stored == 1
    assert await history(recall_store) == [PROMPT, reply('rainy')]
    record = await recall_store.read_record('c')
    assert record is not None and record.branches == [first.head_id]
    counts = await row_counts(recall_store)

    # Attempt 1 was cut off but is still alive: its late writes store nothing and move nothing.
    late = await recall_store.append(
        delta([reply('sunny, late')], base=[PROMPT], key='r1-late', fence=Fence(key='wf/run/1', attempt=1))
    )
    assert late.fenced and late.stored == 0
    assert (late.head_id, late.length) == (second.head_id, 2)
    assert await history(recall_store) == [PROMPT, reply('rainy')]
    assert await recall_store.read_record('c') == record
    assert await row_counts(recall_store) == counts


async def test_a_refused_write_adds_no_usage(recall_store: AnyStore) -> None:
    fence2 = Fence(key='wf/run/3', attempt=2)
    await recall_store.append(delta(turn(1), key='a2', usage=RunUsage(requests=1), fence=fence2))
    stale = delta(turn(1), key='a1', usage=RunUsage(requests=5), fence=Fence(key='wf/run/3', attempt=1))
    assert (await recall_store.append(stale)).fenced
    loaded = await recall_store.load('c')
    assert loaded is not None and loaded.usage == RunUsage(requests=1)


async def test_the_same_attempt_proceeds_and_its_keys_still_replay(recall_store: AnyStore) -> None:
    fence = Fence(key='wf/run/1', attempt=3)
    first = await recall_store.append(delta(turn(1), key='k', fence=fence))
    again = await recall_store.append(delta(turn(1), key='k', fence=fence))
    assert again.replayed and not again.fenced and again.head_id == first.head_id
    more = await recall_store.append(delta(turn(2), base=turn(1), key='k2', fence=fence))
    assert more.stored == 2


async def test_fences_are_per_key_and_per_conversation(recall_store: AnyStore) -> None:
    await recall_store.append(delta(turn(1), key='a', fence=Fence(key='wf/run/1', attempt=5)))
    # Another activity of the same run, and the same activity key in another conversation, are unaffected.
    other = await recall_store.append(delta(turn(2), base=turn(1), key='b', fence=Fence(key='wf/run/2', attempt=1)))
    assert other.stored == 2
    elsewhere = await recall_store.append(
        delta(turn(1), conversation_id='d', key='a', fence=Fence(key='wf/run/1', attempt=1))
    )
    assert elsewhere.stored == 2 and not elsewhere.fenced


async def test_the_attempt_recorded_on_creation_fences_too(recall_store: AnyStore) -> None:
    created = await recall_store.append(delta(turn(1), key='new', fence=Fence(key='wf/run/1', attempt=2)))
    assert created.stored == 2
    assert (await recall_store.append(delta(turn(2), base=turn(1), fence=Fence(key='wf/run/1', attempt=1)))).fenced
    assert await history(recall_store) == turn(1)


async def test_fence_keys_are_reserved(recall_store: AnyStore) -> None:
    with pytest.raises(ValueError, match='reserved'):
        await recall_store.append(delta(turn(1), key='fence:wf/run/1'))


async def test_concurrent_attempts_leave_the_higher_one_on_the_head(site: Site) -> None:
    """Two attempts racing on separate connections: whichever commits first, attempt 2's reply ends up the head."""
    setup = await site.open()
    try:
        await setup.append(delta([PROMPT], key='prompt'))
    finally:
        await setup.close()
    for round_ in range(5):
        stores = [await site.open(), await site.open()]
        try:
            key = f'wf/run/{round_}'
            base: list[m.ModelMessage] = [PROMPT]
            results = await asyncio.gather(
                stores[0].append(delta([reply(f'one {round_}')], base=base, fence=Fence(key=key, attempt=1))),
                stores[1].append(delta([reply(f'two {round_}')], base=base, fence=Fence(key=key, attempt=2))),
            )
            assert not results[1].fenced
            assert (await history(stores[0]))[-1] == reply(f'two {round_}')
        finally:
            for store in stores:
                await store.close()
