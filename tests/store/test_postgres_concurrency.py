"""Many concurrent writers on PostgreSQL: no lost update, no duplicate, no deadlock reaching the caller.

Each test opens several stores (separate pools: separate server sessions, like separate workers) and
races them on purpose: read-modify-write loops on one conversation, appends creating the same
conversation at once, many conversations of one tenant written side by side, and deletes racing
forks that share their entries. Afterwards the index must agree with the log (`problems_of`).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import pytest
from pydantic_ai import messages as m
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict
from pydantic_ai.exceptions import UserError

from temporal_recall.content import content_hash
from temporal_recall.store import AppendRequest, PostgresConversationStore, SearchTarget

from ._support import PostgresSite, hex_hash, postgres_url, postings_of, problems_of, row_counts, turn, user

pytestmark = pytest.mark.postgres


@pytest.fixture
async def stores() -> AsyncIterator[list[PostgresConversationStore]]:
    """Four stores on one fresh schema, four connections each."""
    site = PostgresSite(postgres_url())
    opened: list[PostgresConversationStore] = []
    try:
        for _ in range(4):
            opened.append(await site.open(pool_max=4))
        yield opened
    finally:
        for store in opened:
            await store.close()
        await site.close()


async def test_read_modify_write_loops_lose_no_update(stores: list[PostgresConversationStore]) -> None:
    await stores[0].save(Conversation(messages=[user('start')], conversation_id='c'))
    conflicts = 0

    async def writer(index: int) -> None:
        nonlocal conflicts
        store = stores[index % len(stores)]
        for step in range(3):
            while True:
                loaded = await store.load('c')
                assert loaded is not None
                loaded.messages.append(user(f'writer {index} step {step}'))
                try:
                    await store.save(loaded)
                    break
                except ConversationConflict:
                    conflicts += 1

    await asyncio.gather(*(writer(index) for index in range(12)))
    loaded = await stores[1].load('c')
    assert loaded is not None
    texts = [message.parts[0].content for message in loaded.messages if isinstance(message, m.ModelRequest)]
    assert sorted(texts[1:]) == sorted(f'writer {index} step {step}' for index in range(12) for step in range(3))
    assert conflicts > 0  # the writers really did race
    assert (await row_counts(stores[0]))['entries'] == 1 + 36
    record = await stores[2].read_record('c')
    assert record is not None and record.branches == []
    assert await problems_of(stores[0]) == []


async def test_appends_creating_one_conversation_at_once_store_it_once(stores: list[PostgresConversationStore]) -> None:
    history = [*turn(1), *turn(2)]

    async def create(index: int) -> int:
        result = await stores[index % len(stores)].append(
            AppendRequest(
                conversation_id='new',
                scope='team',
                idempotency_key=f'first-{index}',
                base_length=0,
                base_hash=None,
                messages=history,
            )
        )
        assert result.length == len(history)
        return result.stored

    stored = await asyncio.gather(*(create(index) for index in range(16)))
    assert sorted(stored) == [0] * 15 + [len(history)]
    loaded = await stores[3].load('new')
    assert loaded is not None and loaded.messages == history
    counts = await row_counts(stores[0])
    assert (counts['conversations'], counts['entries'], counts['applied_writes']) == (1, 4, 16)
    assert await problems_of(stores[0]) == []


async def test_many_conversations_of_one_tenant_written_side_by_side(stores: list[PostgresConversationStore]) -> None:
    """Forty conversations, every boundary sent twice by different stores, some without their key."""
    rng = random.Random(11)

    async def send(store: PostgresConversationStore, key: str, request: AppendRequest) -> None:
        await store.append(AppendRequest(**{**request.__dict__, 'idempotency_key': key}))

    async def converse(index: int) -> None:
        history: list[m.ModelMessage] = []
        for step in range(4):
            new = [user(f'conversation {index} step {step} about shared words'), *turn(step, f'topic{index % 7}')[1:]]
            request = AppendRequest(
                conversation_id=f'c{index}',
                scope='team',
                idempotency_key=f'{index}/{step}',
                base_length=len(history),
                base_hash=hex_hash(history[-1]) if history else None,
                messages=new,
                run_id=f'run-{index}-{step}',
            )
            second_key = request.idempotency_key if rng.random() < 0.5 else f'lost-{index}/{step}'
            await asyncio.gather(
                send(stores[rng.randrange(len(stores))], request.idempotency_key, request),
                send(stores[rng.randrange(len(stores))], second_key, request),
            )
            history.extend(new)

    await asyncio.gather(*(converse(index) for index in range(40)))
    for index in range(40):
        entries = await stores[index % 4].load_entries(f'c{index}')
        assert entries is not None and len(entries) == 8
        assert len({content_hash(entry.message) for entry in entries}) == 8
    counts = await row_counts(stores[0])
    assert counts['entries'] == 40 * 8
    assert await problems_of(stores[0]) == []
    everything = SearchTarget(scope='team', conversation_id=None)
    answers = [await postings_of(store, everything, ['shared', 'topic3', 'step']) for store in stores]
    assert all(answer == answers[0] for answer in answers)
    assert len(answers[0]['shared']) == 40 * 4


async def test_deletes_racing_forks_keep_what_the_forks_share(stores: list[PostgresConversationStore]) -> None:
    rounds_with_forks = 0
    for round_ in range(8):
        source = f'src{round_}'
        await stores[0].save(Conversation(messages=[*turn(1, source), *turn(2, source)], conversation_id=source))

        async def fork(index: int, source: str = source) -> str | None:
            await asyncio.sleep(random.uniform(0, 0.01))
            try:
                await stores[index % 4].fork(source, at=3, new_conversation_id=f'{source}-fork{index}', scope='other')
            except (UserError, ConversationConflict):
                return None  # the source was deleted first: a clean refusal
            return f'{source}-fork{index}'

        async def delete(source: str = source) -> None:
            await asyncio.sleep(random.uniform(0, 0.01))
            await stores[3].delete(source)

        outcomes = await asyncio.gather(*(fork(index) for index in range(3)), delete())
        forks = [name for name in outcomes[:3] if name is not None]
        for name in forks:
            loaded = await stores[1].load(name, scope='other')
            assert loaded is not None and loaded.messages == [*turn(1, source), turn(2, source)[0]]
        assert await stores[2].load(source) is None
        rounds_with_forks += bool(forks)
    assert await problems_of(stores[0]) == []
    # The forks of a round share the source's first three entries; the fourth, and every entry of a
    # round without a surviving fork, went with the source.
    assert (await row_counts(stores[0]))['entries'] == 3 * rounds_with_forks


async def test_stores_in_two_schemas_of_one_database_never_share_a_lock() -> None:
    """Advisory locks belong to the whole database; each store's are its schema's own.

    A merge try-lock held in one schema must not make another schema's merge of the same tenant id
    step aside (nor a tenant's lock make its writers wait), while a second store on the same schema
    is kept out: the control that shows the check can fail.
    """
    from temporal_recall.store.postgres._dialect import POSTGRESQL

    one, other = PostgresSite(postgres_url()), PostgresSite(postgres_url())
    first = await one.open()
    same = await one.open()
    elsewhere = await other.open()
    try:
        try_lock = POSTGRESQL.try_lock_merge()
        assert try_lock is not None

        async def holding(session) -> tuple[bool, bool]:  # type: ignore[no-untyped-def]
            assert await session.value(try_lock, 1)

            async def attempt(other_session) -> bool:  # type: ignore[no-untyped-def]
                return bool(await other_session.value(try_lock, 1))

            in_same_schema = await same._backend.run_write(attempt)  # pyright: ignore[reportPrivateUsage]
            in_other_schema = await elsewhere._backend.run_write(attempt)  # pyright: ignore[reportPrivateUsage]
            return in_same_schema, in_other_schema

        assert await first._backend.run_write(holding) == (False, True)  # pyright: ignore[reportPrivateUsage]
    finally:
        for store in (first, same, elsewhere):
            await store.close()
        await one.close()
        await other.close()
