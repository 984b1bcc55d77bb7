"""The message-body store behind `RecallDataCodec`, on every backend: by hash, per scope, written once,
touched when used, counted and pruned."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic_ai.conversation import Conversation
from pydantic_ai.durable_exec.temporal import PydanticAIPayloadConverter
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from temporal_recall.codec import RecallDataCodec
from temporal_recall.errors import ConfigurationError, PruneRefused
from temporal_recall.models import StepDelta
from temporal_recall.store import SqliteConversationStore, _bodies
from temporal_recall.store._bodies import PRUNE_MARGIN
from temporal_recall.store.protocol import BODY_TOUCH_INTERVAL
from temporal_recall.store.sqlite._connection import sqlite_spelling

from ._support import AnyStore

HISTORY = [
    ModelRequest(parts=[UserPromptPart('Where is order A-1042? ' + 'x' * 3000)]),
    ModelResponse(parts=[TextPart('It shipped. ' + 'y' * 3000)]),
]


async def test_bodies_are_kept_per_scope_and_never_overwritten(recall_store: AnyStore) -> None:
    await recall_store.put_bodies('acme', {'h1': b'first', 'h2': b'\x00binary\xff'})
    await recall_store.put_bodies('acme', {'h1': b'not written again'})
    await recall_store.put_bodies(None, {'h1': b'unscoped'})
    await recall_store.put_bodies('acme', {})
    assert await recall_store.get_bodies('acme', ['h1', 'h2', 'missing']) == {'h1': b'first', 'h2': b'\x00binary\xff'}
    assert await recall_store.get_bodies(None, ['h1', 'h2']) == {'h1': b'unscoped'}
    assert await recall_store.get_bodies('', ['h1']) == {}
    assert await recall_store.get_bodies('acme', []) == {}


async def test_the_codec_round_trips_through_the_store(recall_store: AnyStore) -> None:
    delta = StepDelta(conversation_id='c', idempotency_key='k', messages=list(HISTORY))
    original = PydanticAIPayloadConverter().to_payloads([delta])[0]
    [encoded] = await RecallDataCodec(recall_store, scope='acme').encode([original])
    assert b'A-1042' not in encoded.data
    [decoded] = await RecallDataCodec(recall_store, scope='acme').decode([encoded])  # a fresh cache: from the store
    restored = PydanticAIPayloadConverter().from_payloads([decoded], [StepDelta])[0]
    assert restored.messages == HISTORY


# --- Lifecycle: touched times, stats, prune -------------------------------------------------------

DAY = timedelta(days=1)


async def sql(store: AnyStore, statement: str, *params: object) -> list[tuple[Any, ...]]:
    """Run `statement` (`$N` placeholders) on the store's database directly, committed; its rows."""
    if isinstance(store, SqliteConversationStore):
        with closing(sqlite3.connect(store.path)) as db, db:
            return db.execute(sqlite_spelling(statement), params).fetchall()
    async with store._db.connection() as connection:
        return [tuple(row) for row in await connection.fetch(statement, *params)]


async def age(store: AnyStore, scope: str | None, digest: str, by: timedelta) -> int:
    """Set a body's last-use time `by` before now, as if nothing wrote or read it since; returns that time."""
    stamp = int(time.time() - by.total_seconds())
    key = 'n:' if scope is None else f's:{scope}'
    await sql(
        store,
        'UPDATE message_bodies SET touched_at = $1 WHERE scope_key = $2 AND content_hash = $3',
        stamp,
        key,
        digest,
    )
    return stamp


async def touched(store: AnyStore) -> dict[tuple[str, str], int]:
    return {
        (row[0], row[1]): row[2]
        for row in await sql(store, 'SELECT scope_key, content_hash, touched_at FROM message_bodies')
    }


def stamped_since(stamp: int, started: int) -> bool:
    """Whether `stamp` is a time (whole seconds, as the store writes them) between `started` and now:
    the store stamped it during the test, however long the test took."""
    return started <= stamp <= time.time()


async def test_a_body_records_its_last_write_or_read_at_most_once_an_interval(recall_store: AnyStore) -> None:
    started = int(time.time())
    await recall_store.put_bodies('acme', {'h1': b'one', 'h2': b'two', 'h3': b'three'})
    await recall_store.put_bodies('globex', {'h1': b'one'})
    assert all(stamped_since(stamp, started) for stamp in (await touched(recall_store)).values())
    stale = BODY_TOUCH_INTERVAL + timedelta(minutes=5)
    old_h1 = await age(recall_store, 'acme', 'h1', stale)
    fresh_h2 = await age(recall_store, 'acme', 'h2', BODY_TOUCH_INTERVAL / 2)
    old_h3 = await age(recall_store, 'acme', 'h3', stale)
    old_globex = await age(recall_store, 'globex', 'h1', stale)

    assert await recall_store.get_bodies('acme', ['h1', 'h2']) == {'h1': b'one', 'h2': b'two'}
    stamps = await touched(recall_store)
    assert stamped_since(stamps['s:acme', 'h1'], started) and stamps['s:acme', 'h1'] > old_h1  # read: touched
    assert stamps['s:acme', 'h2'] == fresh_h2  # touched within the interval: a hot read writes nothing
    assert stamps['s:acme', 'h3'] == old_h3  # not read
    assert stamps['s:globex', 'h1'] == old_globex  # the same hash in another scope is not touched

    await recall_store.put_bodies('acme', {'h3': b'not written again', 'h2': b'nor this'})
    stamps = await touched(recall_store)
    assert stamped_since(stamps['s:acme', 'h3'], started) and stamps['s:acme', 'h2'] == fresh_h2
    assert await recall_store.get_bodies('acme', ['h2', 'h3']) == {'h2': b'two', 'h3': b'three'}


async def test_body_stats_count_bytes_and_the_oldest_use_per_scope(recall_store: AnyStore) -> None:
    assert await recall_store.body_stats() == []
    started = int(time.time())
    await recall_store.put_bodies('acme', {'h1': b'12345', 'h2': b'\x00' * 100})
    await recall_store.put_bodies(None, {'h1': b'xy'})
    oldest = await age(recall_store, 'acme', 'h2', 3 * DAY)
    stats = {entry.scope: entry for entry in await recall_store.body_stats()}
    assert set(stats) == {'acme', None}
    assert (stats['acme'].bodies, stats['acme'].bytes) == (2, 105)
    assert stats['acme'].oldest_touched == datetime.fromtimestamp(oldest, UTC)
    assert (stats[None].bodies, stats[None].bytes) == (1, 2)
    assert stamped_since(int(stats[None].oldest_touched.timestamp()), started)


async def fill(store: AnyStore) -> dict[str, bytes]:
    """Six bodies in two scopes; `old-*` untouched for 40 days, `new-*` for 20 and today."""
    bodies = {'old-1': b'a' * 10, 'old-2': b'b' * 20, 'new-1': b'c' * 30, 'new-2': b'd' * 40}
    await store.put_bodies('acme', bodies)
    await store.put_bodies('globex', {'old-1': b'e' * 50, 'new-1': b'f' * 60})
    for scope, digest in (('acme', 'old-1'), ('acme', 'old-2'), ('globex', 'old-1')):
        await age(store, scope, digest, 40 * DAY)
    await age(store, 'acme', 'new-1', 20 * DAY)
    return bodies


async def test_prune_removes_only_bodies_untouched_for_longer_than_the_window(
    recall_store: AnyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_bodies, 'PRUNE_BATCH', 2)  # three batches: the loop, not one transaction
    await fill(recall_store)
    started = int(time.time())
    result = await recall_store.prune_bodies(timedelta(days=31), retention=timedelta(days=30))
    assert (result.bodies, result.bytes, result.dry_run) == (3, 80, False)
    assert stamped_since(int(result.cutoff.timestamp()) + 31 * 86400, started)  # 31 days before the prune
    assert set(await touched(recall_store)) == {('s:acme', 'new-1'), ('s:acme', 'new-2'), ('s:globex', 'new-1')}
    assert await recall_store.get_bodies('acme', ['old-1', 'old-2', 'new-1', 'new-2']) == {
        'new-1': b'c' * 30,
        'new-2': b'd' * 40,
    }
    again = await recall_store.prune_bodies(timedelta(days=31), retention=timedelta(days=30))
    assert (again.bodies, again.bytes) == (0, 0)


async def test_a_dry_run_reports_what_prune_would_delete_and_changes_nothing(recall_store: AnyStore) -> None:
    await fill(recall_store)
    before, stats = await touched(recall_store), await recall_store.body_stats()
    result = await recall_store.prune_bodies(timedelta(days=15), retention=timedelta(days=14), dry_run=True)
    assert (result.bodies, result.bytes, result.dry_run) == (4, 110, True)
    assert result.describe().startswith('would delete 4 message bodies (110 bytes) untouched since ')
    assert await touched(recall_store) == before
    assert await recall_store.body_stats() == stats


@pytest.mark.parametrize(
    ('older_than', 'retention'), [(timedelta(days=30), timedelta(days=30)), (timedelta(hours=740), timedelta(days=30))]
)
async def test_prune_refuses_a_window_shorter_than_retention_plus_the_margin(
    recall_store: AnyStore, older_than: timedelta, retention: timedelta
) -> None:
    await fill(recall_store)
    before = await touched(recall_store)
    for dry_run in (False, True):
        with pytest.raises(
            PruneRefused, match=r'untouched for \d.*the retention 30d plus the 1d safety margin.* at least 31d'
        ):
            await recall_store.prune_bodies(older_than, retention=retention, dry_run=dry_run)
    with pytest.raises(ConfigurationError, match='retention must be positive'):
        await recall_store.prune_bodies(timedelta(days=31), retention=timedelta(0))
    assert await touched(recall_store) == before
    assert PRUNE_MARGIN == DAY


async def test_deleting_a_conversation_leaves_every_body(recall_store: AnyStore) -> None:
    """As the README states: bodies are shared by hash within a scope and retained histories may still
    reference them, so only `prune_bodies` removes them."""
    await recall_store.save(Conversation(messages=list(HISTORY), conversation_id='c'), scope='acme')
    delta = StepDelta(conversation_id='c', idempotency_key='k', messages=list(HISTORY))
    [encoded] = await RecallDataCodec(recall_store, scope='acme').encode(
        PydanticAIPayloadConverter().to_payloads([delta])
    )
    before = await touched(recall_store)
    await recall_store.delete('c', scope='acme')
    assert await recall_store.load('c') is None
    assert await touched(recall_store) == before
    [decoded] = await RecallDataCodec(recall_store, scope='acme').decode([encoded])
    assert PydanticAIPayloadConverter().from_payloads([decoded], [StepDelta])[0].messages == HISTORY


# --- Where a body is: its scopes by hash, through an index (migration 13) --------------------------


async def scopes_plan(store: AnyStore, hashes: list[str]) -> str:
    """The plan of `BodyEngine.scopes`' statement, as each backend explains it. PostgreSQL is told not to
    scan the table when anything else can answer, so on a handful of rows the plan still shows which
    index could serve the lookup, as it does by cost on a large table."""
    from temporal_recall.store.sql._session import Session

    async def explain(session: Session) -> list[Any]:
        dialect = session.dialect
        statement = _bodies._SCOPES.format(hashes=dialect.in_array(1, 'text'))  # pyright: ignore[reportPrivateUsage]
        if isinstance(store, SqliteConversationStore):
            return [row[3] for row in await session.rows(f'EXPLAIN QUERY PLAN {statement}', dialect.array(hashes))]
        await session.run('SET LOCAL enable_seqscan = off')
        return [row[0] for row in await session.rows(f'EXPLAIN {statement}', dialect.array(hashes))]

    return '\n'.join(await store._backend.run_read(explain))  # pyright: ignore[reportPrivateUsage]


async def test_the_scopes_holding_a_body_are_found_by_its_hash_without_reading_every_body(
    recall_store: AnyStore,
) -> None:
    for scope in ('acme', 'globex', None):
        await recall_store.put_bodies(scope, {f'{scope}-{n:03}': b'body' for n in range(100)})
    await recall_store.put_bodies('globex', {'shared': b'globex'})
    await recall_store.put_bodies(None, {'shared': b'unscoped'})

    assert await recall_store.body_scopes(['shared']) == [None, 'globex']  # in scope key order
    assert await recall_store.body_scopes(['acme-007', 'globex-001', 'missing']) == ['acme', 'globex']
    assert await recall_store.body_scopes(['missing']) == []
    assert await recall_store.body_scopes([]) == []

    plan = await scopes_plan(recall_store, ['shared', 'acme-007'])
    assert 'message_bodies_by_hash' in plan, plan
    assert 'SCAN message_bodies' not in plan and 'Seq Scan on message_bodies' not in plan, plan
