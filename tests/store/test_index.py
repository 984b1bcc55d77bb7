"""The BM25 index is written with the log, in the same transaction, and reads fail closed (on every backend)."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest
from pydantic_ai import messages as m
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict

from temporal_recall.store import (
    AppendRequest,
    IndexStats,
    PostgresStoreStats,
    Posting,
    SearchTarget,
    SqliteConversationStore,
    StoreStats,
)
from temporal_recall.store.index import _reader, _rebuild
from temporal_recall.store.postings import _blocks, _segments
from temporal_recall.store.protocol import Fence

from ._support import (
    AnyStore,
    column_of,
    hex_hash,
    merge_everything,
    postings_of,
    problems_of,
    reply,
    row_counts,
    rows_of,
    run_sql,
    settle_merges,
    summary,
    tool_call,
    tool_return,
    turn,
    user,
)


def target(conversation_id: str | None, scope: str | None = None, run_id: str | None = None) -> SearchTarget:
    return SearchTarget(scope=scope, conversation_id=conversation_id, run_id=run_id)


async def save(store: AnyStore, conversation_id: str, messages: list[m.ModelMessage], **kw: Any) -> None:
    conversation = await store.load(conversation_id) or Conversation(conversation_id=conversation_id)
    conversation.messages.extend(messages)
    await store.save(conversation, **kw)


async def terms_of(store: AnyStore) -> list[str]:
    return await column_of(store, 'SELECT term FROM terms ORDER BY term')


async def test_documents_and_postings_after_a_save(recall_store: AnyStore) -> None:
    await save(recall_store, 'c', [user('the invoice INV-7731 is late'), reply('I will chase the invoice')])
    stats = await recall_store.index_stats(target('c'))
    assert stats == IndexStats(document_count=2, total_length=6 + 5)
    found = await postings_of(recall_store, target('c'), ['invoice', 'inv', 'missing', 'invoice'])
    assert found == {
        'invoice': [Posting(doc_id=4, term_frequency=1, length=6), Posting(doc_id=8, term_frequency=1, length=5)],
        'inv': [Posting(doc_id=4, term_frequency=1, length=6)],
    }
    rows = await recall_store.documents(target('c'), [8, 4, 99])
    assert [(row.doc_id, row.position, row.conversation_id) for row in rows] == [(8, 1, 'c'), (4, 0, 'c')]
    assert rows[1].message == user('the invoice INV-7731 is late')
    assert rows[1].timestamp == user('x').timestamp
    assert await problems_of(recall_store) == []


async def test_a_conflicting_write_leaves_no_index_rows(recall_store: AnyStore) -> None:
    await save(recall_store, 'c', turn(1))
    a = await recall_store.load('c')
    b = await recall_store.load('c')
    assert a is not None and b is not None
    a.messages.append(user('first writer wins'))
    await recall_store.save(a)
    counts = await row_counts(recall_store)
    b.messages.append(user('second writer brings zebra words'))
    with pytest.raises(ConversationConflict):
        await recall_store.save(b)
    assert await row_counts(recall_store) == counts
    assert 'zebra' not in await terms_of(recall_store)


async def test_a_failure_while_indexing_rolls_back_the_entries_too(
    recall_store: AnyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await save(recall_store, 'c', turn(1))
    counts = await row_counts(recall_store)
    record = await recall_store.read_record('c')

    async def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError('disk gremlin')

    monkeypatch.setattr('temporal_recall.store.log._write.add_members', broken)
    with pytest.raises(RuntimeError, match='gremlin'):
        await save(recall_store, 'c', turn(2))
    assert await row_counts(recall_store) == counts
    assert await recall_store.read_record('c') == record


async def test_resent_messages_are_one_document(recall_store: AnyStore) -> None:
    await save(recall_store, 'c', turn(1))
    # The same content again later in the conversation (a re-sent history): same document.
    await save(recall_store, 'c', [*turn(1), user('new words here')])
    assert (await recall_store.index_stats(target('c'))) == IndexStats(document_count=3, total_length=6 + 5 + 3)
    rows = await recall_store.documents(target('c'), [4])
    assert rows[0].position == 0  # where it first appeared
    assert (await row_counts(recall_store))['documents'] == 3
    assert await problems_of(recall_store) == []


async def test_reinstantiated_messages_are_one_document(recall_store: AnyStore) -> None:
    first = user('hello again')
    await recall_store.append(
        AppendRequest(
            conversation_id='c', scope=None, idempotency_key='1', base_length=0, base_hash=None, messages=[first]
        )
    )
    stamped = m.ModelRequest(parts=[m.UserPromptPart('hello again')], run_id='another-run')
    await save(recall_store, 'd', [stamped])
    assert (await row_counts(recall_store))['documents'] == 1
    assert (await recall_store.index_stats(target('d'))) == IndexStats(document_count=1, total_length=2)


async def test_fork_in_the_same_scope_shares_documents(recall_store: AnyStore) -> None:
    await save(recall_store, 'c', [*turn(1), *turn(2)], scope='team')
    documents = (await row_counts(recall_store))['documents']
    await recall_store.fork('c', at=3, new_conversation_id='f')
    assert (await row_counts(recall_store))['documents'] == documents
    assert (await recall_store.index_stats(target('f', 'team'))) == IndexStats(document_count=3, total_length=6 + 5 + 6)
    assert [row.doc_id for row in await recall_store.documents(target('f', 'team'), [4, 8, 12, 16])] == [4, 8, 12]
    assert await problems_of(recall_store) == []


async def test_fork_into_another_scope_gets_its_own_documents(recall_store: AnyStore) -> None:
    await save(recall_store, 'c', turn(1), scope='alice')
    await recall_store.fork('c', new_conversation_id='f', scope='bob')
    assert (await row_counts(recall_store))['documents'] == 4
    alice = await postings_of(recall_store, target(None, 'alice'), ['weather'])
    bob = await postings_of(recall_store, target(None, 'bob'), ['weather'])
    assert {p.doc_id for p in alice['weather']}.isdisjoint({p.doc_id for p in bob['weather']})
    assert await postings_of(recall_store, target('f', 'alice'), ['weather']) == {}
    assert (await recall_store.index_stats(target('f', 'bob'))) == IndexStats(document_count=2, total_length=11)
    assert await problems_of(recall_store) == []


async def test_summaries_and_wordless_messages_are_stored_but_not_indexed(
    recall_store: AnyStore,
) -> None:
    image = m.ModelRequest(parts=[m.UserPromptPart([m.BinaryImage(data=b'\x89PNG', media_type='image/png')])])
    await save(recall_store, 'c', [user('before the summary'), summary('a summary of everything'), image])
    assert (await recall_store.index_stats(target('c'))) == IndexStats(document_count=1, total_length=3)
    assert await postings_of(recall_store, target('c'), ['everything']) == {}
    loaded = await recall_store.load('c')
    assert loaded is not None and len(loaded.messages) == 3


async def test_delete_removes_the_index_of_what_nothing_else_holds(recall_store: AnyStore) -> None:
    await save(recall_store, 'keep', turn(1), scope='t')
    await save(recall_store, 'gone', [*turn(1), user('unique pelican words')], scope='t')
    await recall_store.fork('gone', new_conversation_id='other-scope', scope='u')
    await recall_store.delete('gone')
    assert await recall_store.index_stats(target('gone', 't')) is None
    assert await postings_of(recall_store, target(None, 't'), ['pelican']) == {}
    assert len((await postings_of(recall_store, target(None, 't'), ['weather']))['weather']) == 2  # 'keep' holds them
    assert (await recall_store.index_stats(target(None, 't'))) == IndexStats(document_count=2, total_length=11)
    assert len((await postings_of(recall_store, target(None, 'u'), ['pelican']))['pelican']) == 1
    await recall_store.delete('other-scope')
    await recall_store.delete('keep')
    counts = await row_counts(recall_store)
    assert [counts[table] for table in ('documents', 'posting_blocks', 'pending_postings')] == [0, 0, 0]
    assert (counts['conversation_documents'], counts['entries']) == (0, 0)
    assert await problems_of(recall_store) == []


async def test_reader_fails_closed_outside_the_scope(recall_store: AnyStore) -> None:
    await save(recall_store, 'scoped', turn(1), scope='alice')
    await save(recall_store, 'unscoped', turn(2))
    await save(recall_store, 'empty', turn(3), scope='')
    for wrong in (
        target('scoped', 'bob'),
        target('scoped', None),
        target('scoped', ''),
        target('unscoped', ''),
        target('empty', None),
        target('missing', 'alice'),
    ):
        assert await recall_store.index_stats(wrong) is None, wrong
        assert await postings_of(recall_store, wrong, ['weather', 'question']) == {}
        assert await recall_store.documents(wrong, [4, 8, 12, 16, 20, 24]) == []
    assert await recall_store.index_stats(target(None, 'nobody')) == IndexStats(document_count=0, total_length=0)
    assert [p.doc_id for p in (await postings_of(recall_store, target(None, None), ['question']))['question']] == [12]
    assert [p.doc_id for p in (await postings_of(recall_store, target(None, ''), ['question']))['question']] == [20]
    assert [row.conversation_id for row in await recall_store.documents(target(None, None), [4, 12, 20])] == [
        'unscoped'
    ]


async def test_run_filters(recall_store: AnyStore) -> None:
    run_b = [*turn(2), tool_call('calc', {'q': 'weather'}, 'k')]
    await recall_store.append(
        AppendRequest(
            conversation_id='c',
            scope='s',
            idempotency_key='1',
            base_length=0,
            base_hash=None,
            messages=turn(1),
            run_id='run-a',
        )
    )
    await recall_store.append(
        AppendRequest(
            conversation_id='c',
            scope='s',
            idempotency_key='2',
            base_length=2,
            base_hash=hex_hash(turn(1)[1]),
            messages=run_b,
            run_id='run-b',
        )
    )
    assert await recall_store.index_stats(target('c', 's', 'run-a')) == IndexStats(document_count=2, total_length=11)
    run_b_stats = await recall_store.index_stats(target('c', 's', 'run-b'))
    assert run_b_stats is not None and run_b_stats.document_count == 3
    assert await recall_store.index_stats(target(None, 's', 'run-b')) == run_b_stats
    assert await recall_store.index_stats(target('c', 's', 'run-z')) == IndexStats(document_count=0, total_length=0)
    assert await recall_store.index_stats(target('c', 'other', 'run-a')) is None
    weather_b = await postings_of(recall_store, target('c', 's', 'run-b'), ['weather'])
    assert [p.doc_id for p in weather_b['weather']] == [12, 16, 20]
    assert await postings_of(recall_store, target(None, 's', 'run-b'), ['weather']) == weather_b
    rows = await recall_store.documents(target('c', 's', 'run-b'), [4, 12], context=5)
    assert [(row.doc_id, row.run_id) for row in rows] == [(12, 'run-b')]
    assert [position for position, _ in rows[0].neighbours] == [3, 4]  # same run only
    rows = await recall_store.documents(target(None, 's'), [8], context=1)
    assert [position for position, _ in rows[0].neighbours] == [0]


async def test_neighbours_follow_the_head_chain(recall_store: AnyStore) -> None:
    await save(recall_store, 'c', [user('zero'), reply('one'), user('two'), reply('three')])
    loaded = await recall_store.load('c')
    assert loaded is not None
    branched = await recall_store.branch('c', at=2, expected_revision=loaded.revision)
    branched.messages.extend([user('two again'), reply('three again')])
    await recall_store.save(branched)
    rows = await recall_store.documents(target('c'), [8], context=2)
    assert [(position, message) for position, message in rows[0].neighbours] == [
        (0, user('zero')),
        (2, user('two again')),
        (3, reply('three again')),
    ]
    # The left branch's entries are still what the conversation said: members with their own neighbours.
    rows = await recall_store.documents(target('c'), [12], context=1)
    assert [position for position, _ in rows[0].neighbours] == [1, 3]


async def test_tool_calls_and_returns_are_searchable(recall_store: AnyStore) -> None:
    await save(
        recall_store,
        'c',
        [tool_call('lookup_order', {'order': 'A-17'}, 'x'), tool_return('lookup_order', {'status': 'shipped'}, 'x')],
    )
    found = await postings_of(recall_store, target('c'), ['shipped', 'a', 'lookup_order'])
    assert set(found) == {'shipped', 'a', 'lookup_order'}


async def _answers(store: AnyStore, targets: list[SearchTarget]) -> list[Any]:
    """Every reader answer over every target and term, with doc ids replaced by their rank."""
    terms = await terms_of(store)
    doc_ids = await column_of(store, 'SELECT doc_id FROM documents ORDER BY doc_id')
    rank = {doc_id: index for index, doc_id in enumerate(doc_ids)}
    answers: list[Any] = []
    for each in targets:
        answers.append(await store.index_stats(each))
        postings = await postings_of(store, each, terms)
        answers.append(
            {term: [(rank[p.doc_id], p.term_frequency, p.length) for p in found] for term, found in postings.items()}
        )
        for row in await store.documents(each, doc_ids, context=2):
            answers.append(
                (
                    rank[row.doc_id],
                    row.conversation_id,
                    row.entry_id,
                    row.run_id,
                    row.position,
                    row.message,
                    row.timestamp,
                    row.neighbours,
                    row.role,
                )
            )
    return answers


@pytest.mark.parametrize('block', [_blocks.BLOCK, 2], ids=['blocks', 'blocks-of-2'])
@pytest.mark.parametrize('page', [_rebuild.BATCH, 2], ids=['one-page', 'pages-of-2'])
async def test_reindex_answers_exactly_like_the_incremental_index(
    recall_store: AnyStore, page: int, block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Forks into the same and other scopes, a branch, a delete, runs and summaries: the rebuilt index numbers
    documents in the order the events happened, however many pages of events the rebuild reads them in and
    however its posting lists are cut into blocks."""
    monkeypatch.setattr(_rebuild, 'BATCH', page)
    monkeypatch.setattr(_blocks, 'BLOCK', block)
    monkeypatch.setattr(_reader, 'BLOCK', block)
    store = recall_store
    await save(store, 'a', [*turn(1), *turn(2)], scope='team')
    await save(store, 'b', [*turn(1, 'taxes'), *turn(2)], scope='team')
    await store.append(
        AppendRequest(
            conversation_id='r',
            scope=None,
            idempotency_key='1',
            base_length=0,
            base_hash=None,
            messages=[*turn(3), summary('sum'), *turn(4)],
            run_id='run-1',
            fence=Fence(key='unit', attempt=1),
        )
    )
    first = turn(3)
    # A retried answer: the first one, and everything only it led to, is superseded (out of a default search).
    await store.append(
        AppendRequest(
            conversation_id='r',
            scope=None,
            idempotency_key='2',
            base_length=1,
            base_hash=hex_hash(first[0]),
            messages=[reply('a retried answer 3 about the weather'), *turn(8, 'birds')],
            run_id='run-1',
            fence=Fence(key='unit', attempt=2),
        )
    )
    await store.fork('a', at=3, new_conversation_id='fork-same', scope='team')
    await store.fork('b', new_conversation_id='fork-other', scope='elsewhere')
    await save(store, 'fork-other', [user('after the fork'), *turn(1)])
    loaded = await store.load('a')
    assert loaded is not None
    branched = await store.branch('a', at=1, expected_revision=loaded.revision)
    branched.messages.extend(turn(5, 'birds'))
    await store.save(branched)
    await save(store, 'doomed', [user('nothing shares this text')], scope='team')
    await store.delete('doomed')
    await save(store, 'late', [*turn(1), *turn(6, 'rivers')], scope='team')
    briefed = m.ModelRequest(parts=[m.SystemPromptPart('answer about rivers'), *user('question 7 rivers').parts])
    await save(store, 'briefed', [briefed, *turn(7, 'rivers'), briefed], scope='team')

    targets = [
        target(name, scope, run)
        for name, scope in [
            ('a', 'team'),
            ('b', 'team'),
            ('r', None),
            ('fork-same', 'team'),
            ('fork-other', 'elsewhere'),
            ('late', 'team'),
            ('briefed', 'team'),
            (None, 'team'),
            (None, None),
            (None, 'elsewhere'),
        ]
        for run in (None, 'run-1')
    ]
    targets += [dataclasses.replace(each, role=role) for each in targets for role in ('system', 'user')]
    targets += [dataclasses.replace(each, include_superseded=True) for each in targets]
    before = await _answers(store, targets)
    progress: list[tuple[int, int]] = []
    documents = await store.reindex(progress=lambda done, total: progress.append((done, total)))
    assert documents == (await row_counts(store))['documents']
    assert progress[0][0] == 0 and progress[-1][0] == progress[-1][1] > 0
    after = await _answers(store, targets)
    assert after == before
    assert await problems_of(store) == []


async def test_blocks_stay_exact_through_deletes_and_later_appends(
    recall_store: AnyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks of three postings: deletes empty some blocks, thin others and take tail blocks away, and the
    writes after them append to what is left. The index stays consistent after every round, and answers
    exactly as one rebuilt from the log does."""
    monkeypatch.setattr(_blocks, 'BLOCK', 3)
    monkeypatch.setattr(_reader, 'BLOCK', 3)
    rng = random.Random(3)
    words = ['alpha', 'beta', 'gamma', 'delta', 'omega']
    live: list[str] = []
    for round_number in range(5):
        for n in range(4):
            name = f'c{round_number}-{n}'
            texts = [' '.join(rng.choices(words, k=rng.randint(1, 6))) for _ in range(rng.randint(1, 4))]
            await save(recall_store, name, [user(f'{text} tag{round_number}x{n}x{i}') for i, text in enumerate(texts)])
            live.append(name)
        for name in rng.sample(live, 2):
            await recall_store.delete(name)
            live.remove(name)
        assert await problems_of(recall_store) == []
        report = await recall_store.check()
        assert report.clean, report.findings
    targets = [target(name) for name in live] + [target(None)]
    before = await _answers(recall_store, targets)
    await recall_store.reindex()
    assert await _answers(recall_store, targets) == before


async def _blocks_of_term(store: AnyStore, term: str) -> list[tuple[int, int, list[Posting]]]:
    """`(first_doc, count, postings)` of each block of `term`, in order."""
    rows = await rows_of(
        store,
        'SELECT b.first_doc, b.count, b.postings FROM posting_blocks b JOIN terms t ON t.term_id = b.term_id '
        f"WHERE t.term = '{term}' ORDER BY b.first_doc",
    )
    return [(first_doc, count, _blocks.decode(first_doc, bytes(stored))) for first_doc, count, stored in rows]


async def test_a_tail_too_far_below_for_32_bit_offsets_stays_and_the_next_block_opens(
    recall_store: AnyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A block's postings are offsets from its first document in 32 bits: when the document ids have moved
    2**32 past a term's open tail (its entries' keys, which they derive from, 2**30), the write leaves the
    tail as it is and opens a block."""
    monkeypatch.setattr(_segments, 'MERGE_SEGMENTS', 1)  # Each write's postings go to the blocks.
    await save(recall_store, 'c', [user('kiwi one'), user('kiwi two')])
    if isinstance(recall_store, SqliteConversationStore):
        await run_sql(recall_store, "UPDATE sqlite_sequence SET seq = seq + 1073741824 WHERE name = 'entries'")
    else:
        await run_sql(
            recall_store,
            "SELECT setval(pg_get_serial_sequence('entries', 'entry_key'), "
            '(SELECT max(entry_key) FROM entries) + 1073741824)',
        )
    await save(recall_store, 'c', [user('kiwi three'), user('kiwi four')])
    await settle_merges(recall_store)
    blocks = await _blocks_of_term(recall_store, 'kiwi')
    assert [count for _, count, _ in blocks] == [2, 2]
    assert blocks[1][0] - blocks[0][0] > 2**32
    report = await recall_store.check()
    assert report.clean, report.findings
    found = await postings_of(recall_store, target('c'), ['kiwi'])
    assert sorted(p.doc_id for p in found['kiwi']) == [p.doc_id for _, _, ps in blocks for p in ps]


async def test_a_conversation_search_reads_blocks_of_allocated_ids(recall_store: AnyStore) -> None:
    """A fork into another scope numbers its documents above every derived id (`FIRST_ALLOCATED`); once
    merged, a term only its reply holds has a block starting above that, which a conversation's search
    must still read when it reads the term's list whole."""
    await save(recall_store, 'b', turn(1, 'taxes'), scope='team')
    await recall_store.fork('b', new_conversation_id='fork-other', scope='elsewhere')
    await save(recall_store, 'other', turn(2, 'rivers'), scope='elsewhere')
    await merge_everything(recall_store)
    found = await postings_of(recall_store, target('fork-other', 'elsewhere'), ['taxes', 'regarding'])
    assert {term: len(postings) for term, postings in found.items()} == {'taxes': 2, 'regarding': 1}


async def test_a_record_rewritten_into_another_scope_moves_its_index(recall_store: AnyStore) -> None:
    await save(recall_store, 'c', turn(1), scope='old')
    record = await recall_store.read_record('c')
    assert record is not None
    moved = dataclasses.replace(record, scope='new', revision='r2')
    await recall_store.write_record(moved, expected_revision=record.revision)
    assert await recall_store.index_stats(target('c', 'old')) is None
    assert await recall_store.index_stats(target('c', 'new')) == IndexStats(document_count=2, total_length=11)
    assert await recall_store.index_stats(target(None, 'old')) == IndexStats(document_count=0, total_length=0)
    assert await problems_of(recall_store) == []


async def test_stats(recall_store: AnyStore) -> None:
    await save(recall_store, 'c', [*turn(1), *turn(2)])
    await recall_store.fork('c', new_conversation_id='f')
    stats = await recall_store.stats()
    assert (stats.conversations, stats.entries, stats.documents) == (2, 4, 4)
    stored = 'SELECT length(postings) FROM posting_blocks UNION ALL SELECT length(postings) FROM pending_postings'
    assert stats.postings == sum(await column_of(recall_store, stored)) // 12 > 0
    assert stats.database_bytes > 0
    if isinstance(recall_store, SqliteConversationStore):
        assert isinstance(stats, StoreStats) and stats.path == recall_store.path
    else:
        assert isinstance(stats, PostgresStoreStats)
        assert (stats.url, stats.schema) == (recall_store.url, recall_store.schema)
