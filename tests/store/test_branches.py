"""A conversation's index follows its head: what only a branch it left holds is out of a default search,
back when the head returns, and found on request (`include_branches`), on every backend."""

from __future__ import annotations

import pytest
from pydantic_ai.conversation_store import ConversationRecord

from temporal_recall.models import SearchRequest
from temporal_recall.search.plan import search_index
from temporal_recall.store import IndexStats, SearchTarget
from temporal_recall.store.sql._migrations import latest_version

from ._support import (
    AnyStore,
    Site,
    answered_twice,
    append_after,
    back_to_version_9,
    column_of,
    problems_of,
    reopened_logging,
    reply,
    run_sql,
    user,
)

QUESTION = user('which animal does the zoo keeper feed first?')
FIRST = reply('the keeper feeds the zebra first, then the lions')
SECOND = reply('the keeper feeds the giraffe first, at dawn')


def request(query: str, **options: object) -> SearchRequest:
    return SearchRequest(query=query, conversation_id='c', scope='zoo', **options)  # type: ignore[arg-type]


async def found(store: AnyStore, query: str, **options: object) -> list[tuple[int, str]]:
    """Each hit's position, and which answer it shows (`first`, `second`) or its excerpt."""
    result = await search_index(store, request(query, **options))
    return [(hit.position, _which(hit.excerpt)) for hit in result.hits]


def _which(excerpt: str) -> str:
    return 'first' if 'zebra first' in excerpt else 'second' if 'giraffe first' in excerpt else excerpt


async def answers(store: AnyStore) -> list[list[tuple[str, str, float]]]:
    """Hits and scores of default, branch-including, scope-wide and role-filtered searches."""
    searches = [
        SearchRequest(query=query, scope='zoo', **target)  # type: ignore[arg-type]
        for query in ('keeper feeds first', 'zebra lions', 'giraffe dawn', 'animal zoo')
        for target in (
            {'conversation_id': 'c'},
            {'conversation_id': 'c', 'include_branches': True},
            {'conversation_id': 'c', 'role': 'assistant'},
            {'conversation_id': 'c', 'role': 'assistant', 'include_branches': True},
            {'all_conversations': True},
            {'all_conversations': True, 'include_branches': True},
        )
    ]
    return [
        [(hit.conversation_id, hit.entry_id, hit.score) for hit in (await search_index(store, each)).hits]
        for each in searches
    ]


async def move_head(store: AnyStore, conversation_id: str) -> None:
    """Put the head on the conversation's first kept branch and keep the old head as a branch (a save that
    goes back to an earlier answer)."""
    record = await store.read_record(conversation_id)
    assert record is not None and record.head_id is not None and record.branches
    back = ConversationRecord(
        conversation_id=record.conversation_id,
        head_id=record.branches[0],
        usage=record.usage,
        scope=record.scope,
        branches=[*record.branches[1:], record.head_id],
    )
    await store.write_record(back, new_entries=[], expected_revision=record.revision)


async def retried(store: AnyStore) -> None:
    """A question answered, then answered again differently from the same point (a retried model call)."""
    texts = (part.content for message in (QUESTION, FIRST, SECOND) for part in message.parts)
    await answered_twice(store, 'c', 'zoo', *(str(text) for text in texts))
    record = await store.read_record('c')
    assert record is not None and len(record.branches) == 1


async def stats(store: AnyStore, *, include_branches: bool = False) -> IndexStats | None:
    return await store.index_stats(
        SearchTarget(scope='zoo', conversation_id='c', run_id=None, include_branches=include_branches)
    )


async def test_the_index_follows_the_head_to_a_branch_and_back(recall_store: AnyStore) -> None:
    store = recall_store
    await append_after(store, 'c', 'zoo', [], [QUESTION, FIRST])
    assert await found(store, 'zebra') == [(1, 'first')]
    before = await stats(store)

    await retried(store)
    assert await found(store, 'zebra') == []
    assert await found(store, 'zebra', include_branches=True) == [(1, 'first')]
    assert await found(store, 'giraffe') == [(1, 'second')]
    assert await found(store, 'feeds') == [(1, 'second')]
    # BM25 statistics are those of what a default search sees: one answer's document, not two.
    current, everything = await stats(store), await stats(store, include_branches=True)
    assert current is not None and before is not None and everything is not None
    assert current.document_count == before.document_count == everything.document_count - 1
    assert (await store.check()).clean
    assert await problems_of(store) == []

    await move_head(store, 'c')  # back to the first answer
    assert await found(store, 'zebra') == [(1, 'first')]
    assert await found(store, 'giraffe') == []
    assert await found(store, 'giraffe', include_branches=True) == [(1, 'second')]
    assert await stats(store) == before
    assert (await store.check()).clean

    await move_head(store, 'c')  # and to the second again
    assert await found(store, 'zebra') == []
    assert await found(store, 'giraffe') == [(1, 'second')]
    before_rebuild = await answers(store)
    assert await store.reindex() == 3  # the question and both answers: a branch's messages stay indexed
    assert await answers(store) == before_rebuild
    assert (await store.check()).clean


async def test_appends_after_a_retry_keep_the_left_answer_out(recall_store: AnyStore) -> None:
    """Later writes on the new head keep the mark; a message repeating the left answer brings its words back."""
    store = recall_store
    await retried(store)
    history = [QUESTION, SECOND]
    history = await append_after(store, 'c', 'zoo', history, [user('and after that?'), reply('the penguins')])
    assert await found(store, 'zebra') == []
    assert await found(store, 'penguins') == [(3, 'the penguins')]
    await append_after(store, 'c', 'zoo', history, [user('repeat the other answer'), FIRST])
    assert await found(store, 'zebra') == [(5, 'first')]
    before = await answers(store)
    await store.reindex()
    assert await answers(store) == before
    assert (await store.check()).clean
    assert await problems_of(store) == []


async def test_a_fork_keeps_its_own_membership(recall_store: AnyStore) -> None:
    store = recall_store
    await append_after(store, 'c', 'zoo', [], [QUESTION, FIRST])
    await store.fork('c', new_conversation_id='f', scope='zoo')
    await retried(store)
    assert await found(store, 'zebra') == []
    fork = SearchRequest(query='zebra', conversation_id='f', scope='zoo')
    assert [hit.position for hit in (await search_index(store, fork)).hits] == [1]
    # Scope-wide, the fork still holds the first answer; the conversation that left it does not.
    everywhere = SearchRequest(query='zebra', scope='zoo', all_conversations=True)
    assert [hit.conversation_id for hit in (await search_index(store, everywhere)).hits] == ['f']
    assert (await store.check()).clean


async def test_check_flags_a_wrong_mark_and_counter(recall_store: AnyStore) -> None:
    store = recall_store
    await retried(store)
    assert (await store.check()).clean
    await run_sql(store, 'UPDATE conversation_documents SET branch_only = NOT branch_only')
    findings = [str(finding) for finding in (await store.check()).findings]
    assert any('marked as on the current history, but only a branch holds it' in line for line in findings)
    assert any('marked as on a branch only, but the head reaches an entry holding it' in line for line in findings)
    await run_sql(store, 'UPDATE conversation_documents SET branch_only = NOT branch_only')
    await run_sql(store, 'UPDATE conversations SET document_count = document_count + 1')
    findings = [str(finding) for finding in (await store.check()).findings]
    assert findings and all("conversation 'c'" in line and 'counts' in line for line in findings), findings


async def test_a_version_9_store_is_reindexed_into_marked_members(site: Site, caplog: pytest.LogCaptureFixture) -> None:
    """A store of version 9 (every member of a kept branch in a default search) upgrades with progress, and
    then answers as a store written by this release."""
    store = await site.open()
    try:
        await retried(store)
        await append_after(store, 'other', 'zoo', [], [user('the zebra escaped'), reply('catch the zebra')])
        expected = await answers(store)
        await back_to_version_9(store)
    finally:
        await store.close()
    store, progress = await reopened_logging(site, caplog)
    try:
        assert progress, 'the upgrade reports its progress'
        assert all('10 (search sees the current history' in line for line in progress)
        assert progress[0].endswith('reindexing, 0 of 5 entries done.')
        assert progress[-1].endswith('reindexing, 5 of 5 entries done.')
        assert max(await column_of(store, 'SELECT version FROM schema_migrations')) == latest_version()
        assert await answers(store) == expected
        assert await found(store, 'zebra') == []
        report = await store.check()
        assert report.clean, report.findings
        assert await problems_of(store) == []
    finally:
        await store.close()


def test_the_model_facing_request_defaults_to_the_current_history() -> None:
    assert SearchRequest(query='x', conversation_id='c').include_branches is False
    assert SearchTarget(scope=None, conversation_id='c').include_branches is False


async def test_a_save_of_a_shorter_history_takes_the_cut_turns_out_of_recall(recall_store: AnyStore) -> None:
    """`save` of a history cut back (an application undoing its last turn) moves the head to an earlier
    entry: what only the cut turns held leaves a default search, and stays reachable with branches."""
    store = recall_store
    await append_after(store, 'c', 'zoo', [], [QUESTION, FIRST, user('and the penguins?'), reply('penguins at noon')])
    assert await found(store, 'penguins') == [(2, 'and the penguins?'), (3, 'penguins at noon')]
    loaded = await store.load('c', scope='zoo')
    assert loaded is not None
    del loaded.messages[2:]
    await store.save(loaded)
    assert await found(store, 'penguins') == []
    assert await found(store, 'zebra') == [(1, 'first')]
    assert [position for position, _ in await found(store, 'penguins', include_branches=True)] == [2, 3]
    before = await answers(store)
    await store.reindex()
    assert await answers(store) == before
    assert (await store.check()).clean
