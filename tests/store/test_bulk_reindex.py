"""`recall reindex` (tenant by tenant, events in bulk batches) leaves exactly the index the writes built,
resumes where a stopped run left off, and lets other tenants' writers go on (on every backend)."""

from __future__ import annotations

import asyncio
import logging
import random
import sqlite3
from collections.abc import Sequence
from contextlib import closing
from typing import Any

import pydantic
import pytest

from temporal_recall.models import SearchRequest
from temporal_recall.search.plan import search_index
from temporal_recall.store import PostgresConversationStore
from temporal_recall.store.index import _ahead, _bulk, _rebuild
from temporal_recall.store.index._terms import FIRST_ALLOCATED, decode_term_ids
from temporal_recall.store.postings import _blocks

from ._support import AnyStore, merge_everything, reply, rows_of, summary, turn, user
from .test_index import save

SCOPES = ('acme', None, 'globex')
WORDS = ('harbour', 'parcel', 'refund', 'invoice', 'wombat', 'river', 'ledger', 'courier', 'depot', 'noon')


async def _fill(store: AnyStore, seed: int = 51) -> None:
    """Conversations in three scopes, sharing messages, with forks within and across scopes, a branch, a
    summary, a delete, conversations later extended or moved to another scope, a message said twice in one
    conversation: every way a document joins a conversation."""
    rng = random.Random(seed)
    for number in range(9):
        scope = SCOPES[number % 3]
        texts = [' '.join(rng.choices(WORDS, k=rng.randint(2, 6))) for _ in range(rng.randint(2, 6))]
        messages = [user(text) if index % 2 == 0 else reply(text) for index, text in enumerate(texts)]
        await save(store, f'c{number}', [*turn(number % 4), *messages], scope=scope)
    await save(store, 'c0', [summary('what was said'), *turn(7, 'ledgers')])
    await store.fork('c1', new_conversation_id='fork-same', scope=None)
    await store.fork('c0', at=3, new_conversation_id='fork-across', scope='globex')
    await save(store, 'fork-across', [user('after the fork about the harbour'), *turn(1)])
    loaded = await store.load('c3')
    assert loaded is not None
    branched = await store.branch('c3', at=1, expected_revision=loaded.revision)
    branched.messages.extend(turn(5, 'depots'))
    await store.save(branched)
    await save(store, 'doomed', [user('parcel words nobody else said')], scope='acme')
    await store.delete('doomed')
    await save(store, 'c4', turn(9, 'rivers'))
    await save(store, 'again', [user('say it again wombat'), reply('wombat ok'), user('say it again wombat')])


async def index_tables(store: AnyStore) -> dict[str, Any]:
    """Every index table, with the pending segments merged, in terms of what the rows mean: scopes, terms,
    conversations and document keys instead of ids; a document's derived id as it is, an allocated one
    as its rank in its tenant (the order is what a search's tie-break sees)."""
    await merge_everything(store)
    assert await rows_of(store, 'SELECT count(*) FROM pending_postings') == [(0,)]
    scopes = dict(await rows_of(store, 'SELECT tenant_id, scope_key FROM tenants'))
    terms = dict(await rows_of(store, 'SELECT term_id, term FROM terms'))
    names = dict(await rows_of(store, 'SELECT conv_key, conversation_id FROM conversations'))
    documents = await rows_of(
        store, 'SELECT doc_id, tenant_id, content_hash, role, length, term_ids FROM documents ORDER BY doc_id'
    )
    key: dict[int, tuple[Any, ...]] = {}
    rank: dict[int, int] = {}
    table: list[tuple[Any, ...]] = []
    for doc_id, tenant_id, content, role, length, term_ids in documents:
        key[doc_id] = (scopes[tenant_id], bytes(content).hex(), role)
        rank[tenant_id] = rank.get(tenant_id, -1) + 1
        derived = doc_id if doc_id < FIRST_ALLOCATED else None
        words = sorted(terms[term_id] for term_id in decode_term_ids(bytes(term_ids)))
        table.append((*key[doc_id], derived, rank[tenant_id], length, words))
    postings = [
        (scopes[tenant_id], terms[term_id], key[posting.doc_id], posting.term_frequency, posting.length)
        for tenant_id, term_id, first_doc, stored in await rows_of(
            store, 'SELECT tenant_id, term_id, first_doc, postings FROM posting_blocks'
        )
        for posting in _blocks.decode(first_doc, bytes(stored))
    ]
    members = await rows_of(
        store,
        'SELECT conv_key, doc_id, entry_key, run_key, position, occurrences, superseded FROM conversation_documents',
    )
    return {
        'documents': sorted(table, key=repr),
        'postings': sorted(postings, key=repr),
        'memberships': sorted(
            (
                (names[conv], key[doc], entry, run, position, count, bool(marked))
                for conv, doc, entry, run, position, count, marked in members
            ),
            key=repr,
        ),
        'term_documents': sorted(
            (scopes[tenant], terms[term], count)
            for tenant, term, count in await rows_of(
                store, 'SELECT tenant_id, term_id, document_count FROM term_documents'
            )
        ),
        'tenants': sorted(await rows_of(store, 'SELECT scope_key, document_count, total_length FROM tenants')),
        'conversations': sorted(
            await rows_of(store, 'SELECT conversation_id, document_count, total_length FROM conversations')
        ),
    }


async def searches(store: AnyStore) -> list[Any]:
    """The hits and scores of searches over every scope, each conversation, roles and superseded rows."""
    answers: list[Any] = []
    conversations = await rows_of(
        store, 'SELECT c.conversation_id, t.scope_key FROM conversations c JOIN tenants t USING (tenant_id)'
    )
    for query in ('harbour parcel', 'refund', 'question about the weather', 'wombat noon depot', 'ledgers'):
        requests = [SearchRequest(query=query, scope=scope, all_conversations=True, limit=50) for scope in SCOPES]
        requests += [
            SearchRequest(query=query, conversation_id=name, scope=None if key == 'n:' else key[2:], limit=50)
            for name, key in sorted(conversations)
        ]
        requests += [request.model_copy(update={'role': 'user'}) for request in requests]
        for request in requests:
            found = await search_index(store, request)
            answers.append([(hit.conversation_id, hit.position, hit.score) for hit in found.hits])
    return answers


@pytest.mark.parametrize(
    ('batch', 'ahead'),
    [(_rebuild.BATCH, False), (3, False), (3, True)],
    ids=['one-batch', 'batches-of-3', 'batches-of-3-analysed-ahead'],
)
async def test_reindex_leaves_every_index_table_as_the_writes_built_it(
    recall_store: AnyStore, batch: int, ahead: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_rebuild, 'BATCH', batch)
    monkeypatch.setattr(_ahead, 'PARALLEL_FROM', 0 if ahead else 10**9)
    sent = _count_calls(monkeypatch, _ahead._Analyst, 'send')  # pyright: ignore[reportPrivateUsage]
    await _fill(recall_store)
    tables, hits = await index_tables(recall_store), await searches(recall_store)
    assert tables['postings'] and tables['memberships']
    await recall_store.reindex()
    assert await index_tables(recall_store) == tables
    assert await searches(recall_store) == hits
    assert (await recall_store.check()).clean
    assert (sent.count > 0) == ahead  # The batches were analysed in the other process, or here.


class _Calls:
    count = 0


def _count_calls(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> _Calls:
    calls, wrapped = _Calls(), getattr(module, name)

    def counted(*args: Any) -> Any:
        calls.count += 1
        return wrapped(*args)

    monkeypatch.setattr(module, name, counted)
    return calls


async def test_a_failed_analysis_process_leaves_the_batches_to_the_rebuild(
    recall_store: AnyStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The analysis process exits at once (as a killed one would): the rebuild says so and analyses every
    batch itself; the index is the one the writes built."""
    monkeypatch.setattr(_rebuild, 'BATCH', 3)
    monkeypatch.setattr(_ahead, 'PARALLEL_FROM', 0)
    monkeypatch.setattr(_ahead, 'ANALYST', ('-c', 'pass'))
    await _fill(recall_store)
    tables, hits = await index_tables(recall_store), await searches(recall_store)
    with caplog.at_level(logging.WARNING, logger='temporal_recall.store'):
        await recall_store.reindex()
    assert any('analysis process failed' in record.getMessage() for record in caplog.records)
    assert await index_tables(recall_store) == tables
    assert await searches(recall_store) == hits


async def test_a_rebuild_that_fails_ends_its_analysis_process(
    recall_store: AnyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rebuild failing while the next batch is being analysed raises its own error, and the process goes."""
    monkeypatch.setattr(_rebuild, 'BATCH', 3)
    monkeypatch.setattr(_ahead, 'PARALLEL_FROM', 0)
    await _fill(recall_store)
    tables = await index_tables(recall_store)
    started: list[Any] = []
    start = _ahead._Analyst.start  # pyright: ignore[reportPrivateUsage]

    def recorded() -> Any:
        started.append(start())
        return started[-1]

    monkeypatch.setattr(_ahead._Analyst, 'start', recorded)  # pyright: ignore[reportPrivateUsage]
    index_events = _bulk.index_events
    calls: list[int] = []

    async def failing(session: Any, events: Sequence[_bulk.Event], *rest: Any) -> int:
        calls.append(len(events))
        if len(calls) == 2:
            raise RuntimeError('stopped')
        return await index_events(session, events, *rest)

    monkeypatch.setattr(_rebuild, 'index_events', failing)
    with pytest.raises(RuntimeError, match='stopped'):
        await recall_store.reindex()
    assert len(started) == 1
    assert started[0]._process.poll() is not None
    assert await index_tables(recall_store) == tables


@pytest.mark.parametrize('ahead', [False, True], ids=['analysed-here', 'analysed-ahead'])
async def test_a_message_that_does_not_parse_fails_the_rebuild_as_itself(
    recall_store: AnyStore, ahead: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stored message the adapter refuses fails the tenant's rebuild with the adapter's own error, however
    the batch was analysed, and the tenant's old index stays whole."""
    monkeypatch.setattr(_rebuild, 'BATCH', 3)
    monkeypatch.setattr(_ahead, 'PARALLEL_FROM', 0 if ahead else 10**9)
    await _fill(recall_store)
    tables = await index_tables(recall_store)
    await _write(recall_store, 'UPDATE entries SET message = replace(message, \'"parts"\', \'"partz"\')')
    with pytest.raises(pydantic.ValidationError):
        await recall_store.reindex()
    assert await index_tables(recall_store) == tables


async def _write(store: AnyStore, statement: str) -> None:
    """Run `statement` on the store's database and commit it, as a hand at the database would."""
    if isinstance(store, PostgresConversationStore):
        await rows_of(store, statement)
        return
    with closing(sqlite3.connect(store.path)) as db:
        db.execute(statement)
        db.commit()


async def test_a_stopped_reindex_resumes_after_the_last_tenant_it_finished(
    recall_store: AnyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure in the second tenant's rebuild: the first tenant's new index stays (and is recorded), the
    second's old one is whole; the next run rebuilds only the tenants after the first, and the end is
    the index the writes built."""
    monkeypatch.setattr(_rebuild, 'BATCH', 3)
    await _fill(recall_store)
    tables, hits = await index_tables(recall_store), await searches(recall_store)
    tenants = [int(row[0]) for row in await rows_of(recall_store, 'SELECT tenant_id FROM tenants ORDER BY tenant_id')]
    assert len(tenants) == 3
    index_events = _bulk.index_events
    calls: list[int] = []

    async def failing(session: Any, events: Sequence[_bulk.Event], *rest: Any) -> int:
        calls.append(events[0].tenant_id)
        if events[0].tenant_id == tenants[1] and calls.count(tenants[1]) == 2:
            raise RuntimeError('stopped')
        return await index_events(session, events, *rest)

    monkeypatch.setattr(_rebuild, 'index_events', failing)
    with pytest.raises(RuntimeError, match='stopped'):
        await recall_store.reindex()
    assert await rows_of(recall_store, "SELECT value FROM index_settings WHERE name = 'reindex'") == [
        (str(tenants[0]),)
    ]
    assert (await recall_store.check()).clean
    assert await searches(recall_store) == hits
    calls.clear()
    monkeypatch.setattr(_rebuild, 'index_events', index_events)
    rebuilt: list[int] = []
    rebuild_tenant = _rebuild.rebuild_tenant

    async def counted(session: Any, tenant_id: int, progress: Any = None) -> int:
        rebuilt.append(tenant_id)
        return await rebuild_tenant(session, tenant_id, progress)

    monkeypatch.setattr('temporal_recall.store._reindex.rebuild_tenant', counted)
    progress: list[tuple[int, int]] = []
    await recall_store.reindex(progress=lambda done, total: progress.append((done, total)))
    assert rebuilt == tenants[1:]
    assert progress[0][0] == 0 and progress[-1][0] == progress[-1][1] > 0
    assert await rows_of(recall_store, "SELECT value FROM index_settings WHERE name = 'reindex'") == []
    assert await index_tables(recall_store) == tables
    assert await searches(recall_store) == hits
    assert (await recall_store.check()).clean


async def test_other_tenants_write_during_a_tenant_rebuild_and_its_own_writers_wait(
    recall_store: AnyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL: while one tenant's rebuild is under way, an append to another tenant commits, and an
    append to the tenant being rebuilt waits for it, then adds to the new index; the end is the index
    the writes built."""
    if not isinstance(recall_store, PostgresConversationStore):
        pytest.skip('SQLite runs one write at a time: every writer waits for each tenant rebuild')
    await _fill(recall_store)
    first = int((await rows_of(recall_store, "SELECT tenant_id FROM tenants WHERE scope_key = 's:acme'"))[0][0])
    inside, release = asyncio.Event(), asyncio.Event()
    index_events = _bulk.index_events

    async def paused(session: Any, events: Sequence[_bulk.Event], *rest: Any) -> int:
        if events[0].tenant_id == first and not release.is_set():
            inside.set()
            await release.wait()
        return await index_events(session, events, *rest)

    monkeypatch.setattr(_rebuild, 'index_events', paused)
    reindexing = asyncio.create_task(recall_store.reindex())
    await asyncio.wait_for(inside.wait(), 30)
    await asyncio.wait_for(save(recall_store, 'c2', [user('a globex wombat during the rebuild')], scope='globex'), 30)
    waiting = asyncio.create_task(save(recall_store, 'c0', [user('an acme wombat during the rebuild')], scope='acme'))
    await asyncio.sleep(0.3)
    assert not waiting.done(), "a write to the tenant being rebuilt waits for the tenant's rebuild"
    release.set()
    await asyncio.wait_for(reindexing, 60)
    await asyncio.wait_for(waiting, 30)
    for scope, text in (
        ('acme', 'an acme wombat during the rebuild'),
        ('globex', 'a globex wombat during the rebuild'),
    ):
        found = await search_index(recall_store, SearchRequest(query=text, scope=scope, all_conversations=True))
        assert found.hits and found.hits[0].conversation_id in {'c0', 'c2'}
    assert (await recall_store.check()).clean
    tables, hits = await index_tables(recall_store), await searches(recall_store)
    monkeypatch.setattr(_rebuild, 'index_events', index_events)
    await recall_store.reindex()
    assert await index_tables(recall_store) == tables
    assert await searches(recall_store) == hits


def test_a_rebuild_looks_up_only_the_contents_it_may_have_created() -> None:
    """`Rebuilding` skips the lookup of a content it has created no document of (there is none: the
    rebuild emptied the tenant), and keeps every content it did create, a prefix shared by chance included."""
    known = _bulk.Rebuilding()
    first, second, twin, fresh = b'\x01' * 32, b'\x02' * 32, b'\x01' * 8 + b'\xff' * 24, b'\x03' * 32
    assert known.maybe_stored(7, [first, second]) == []
    known.created([(7, second), (7, first)])
    assert known.maybe_stored(7, [fresh, first, twin, second]) == [first, twin, second]
    assert known.maybe_stored(8, [first]) == []  # Another tenant's contents are its own.
    known.created([(7, fresh)])
    assert known.maybe_stored(7, [fresh, b'\x00' * 32]) == [fresh]
