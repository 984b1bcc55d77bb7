"""A default search sees everything a conversation stored, on its head and on every branch it left, except
what was superseded inside one agent run (an answer a retried model request replaced); the opt-in
`include_superseded` adds that too. On every backend (`index._superseded`)."""

from __future__ import annotations

import warnings

import pytest
from pydantic_ai.conversation_store import ConversationRecord

from temporal_recall.models import SearchRequest
from temporal_recall.search.plan import search_index
from temporal_recall.store import IndexStats, SearchTarget
from temporal_recall.store.sql._migrations import latest_version

from ._support import (
    AnyStore,
    Site,
    answered_again,
    answered_twice,
    append_after,
    back_to_version_9,
    back_to_version_11,
    column_of,
    problems_of,
    reopened_logging,
    reply,
    run_sql,
    user,
)

TEXTS = (
    'which animal does the zoo keeper feed first?',
    'the keeper feeds the zebra first, then the lions',
    'the keeper feeds the giraffe first, at dawn',
)
QUESTION, FIRST, SECOND = user(TEXTS[0]), reply(TEXTS[1]), reply(TEXTS[2])


def request(query: str, **options: object) -> SearchRequest:
    return SearchRequest(query=query, conversation_id='c', scope='zoo', **options)  # type: ignore[arg-type]


async def found(store: AnyStore, query: str, **options: object) -> list[tuple[int, str]]:
    """Each hit's position, and which answer it shows (`first`, `second`) or its excerpt."""
    result = await search_index(store, request(query, **options))
    return [(hit.position, _which(hit.excerpt)) for hit in result.hits]


def _which(excerpt: str) -> str:
    return 'first' if 'zebra first' in excerpt else 'second' if 'giraffe first' in excerpt else excerpt


async def answers(store: AnyStore) -> list[list[tuple[str, str, float]]]:
    """Hits and scores of default, superseded-including, scope-wide and role-filtered searches."""
    searches = [
        SearchRequest(query=query, scope='zoo', **target)  # type: ignore[arg-type]
        for query in ('keeper feeds first', 'zebra lions', 'giraffe dawn', 'animal zoo', 'penguins noon')
        for target in (
            {'conversation_id': 'c'},
            {'conversation_id': 'c', 'include_superseded': True},
            {'conversation_id': 'c', 'role': 'assistant'},
            {'conversation_id': 'c', 'role': 'assistant', 'include_superseded': True},
            {'all_conversations': True},
            {'all_conversations': True, 'include_superseded': True},
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
    """A question answered, then answered again differently by a retry of the same model request."""
    await answered_twice(store, 'c', 'zoo', *TEXTS)
    record = await store.read_record('c')
    assert record is not None and len(record.branches) == 1


async def stats(store: AnyStore, *, include_superseded: bool = False) -> IndexStats | None:
    return await store.index_stats(
        SearchTarget(scope='zoo', conversation_id='c', run_id=None, include_superseded=include_superseded)
    )


async def test_a_retried_answer_is_superseded_and_found_on_request(recall_store: AnyStore) -> None:
    store = recall_store
    await append_after(store, 'other', 'zoo', [], [user('a zebra crossing')])
    await retried(store)
    assert await found(store, 'zebra') == []
    assert await found(store, 'zebra', include_superseded=True) == [(1, 'first')]
    assert await found(store, 'giraffe') == [(1, 'second')]
    assert await found(store, 'feeds') == [(1, 'second')]
    # BM25 statistics are those of what a default search sees: the question and one answer.
    current, everything = await stats(store), await stats(store, include_superseded=True)
    assert current is not None and everything is not None
    assert (current.document_count, everything.document_count) == (2, 3)
    # Scope-wide too: the superseded answer is nobody's, the other conversation's zebra is found.
    everywhere = SearchRequest(query='zebra', scope='zoo', all_conversations=True)
    assert [hit.conversation_id for hit in (await search_index(store, everywhere)).hits] == ['other']
    assert (await store.check()).clean
    assert await problems_of(store) == []


async def test_the_head_is_never_hidden_and_a_left_answer_is_still_said(recall_store: AnyStore) -> None:
    """An application that puts the head back on the replaced answer makes it the conversation again; the
    answer it left then is on a branch, said, and found."""
    store = recall_store
    await retried(store)
    await move_head(store, 'c')  # back to the first answer
    assert await found(store, 'zebra') == [(1, 'first')]
    assert await found(store, 'giraffe') == [(1, 'second')]
    current = await stats(store)
    assert current is not None and current.document_count == 3
    assert (await store.check()).clean

    await move_head(store, 'c')  # and to the second again
    assert await found(store, 'zebra') == []
    assert await found(store, 'giraffe') == [(1, 'second')]
    before_rebuild = await answers(store)
    assert await store.reindex() == 3
    assert await answers(store) == before_rebuild
    assert (await store.check()).clean


async def test_an_answer_written_again_without_a_retry_stays_found(recall_store: AnyStore) -> None:
    """A regenerated answer or a rewritten turn (a later write, not a later attempt of the same request)
    leaves the first answer on a branch, and a default search still finds both, once each."""
    store = recall_store
    await answered_again(store, 'c', 'zoo', *TEXTS)
    assert await found(store, 'zebra') == [(1, 'first')]
    assert await found(store, 'giraffe') == [(1, 'second')]
    assert sorted(await found(store, 'feeds')) == [(1, 'first'), (1, 'second')]
    current, everything = await stats(store), await stats(store, include_superseded=True)
    assert current == everything
    assert current is not None and current.document_count == 3
    assert (await store.check()).clean


async def test_appends_after_a_retry_keep_the_superseded_answer_out(recall_store: AnyStore) -> None:
    """Later writes on the new head keep the mark; a message repeating the replaced answer brings its words back."""
    store = recall_store
    await retried(store)
    history = [QUESTION, SECOND]
    history = await append_after(store, 'c', 'zoo', history, [user('and after that?'), reply('the penguins')])
    assert await found(store, 'zebra') == []
    assert await found(store, 'penguins') == [(3, 'the penguins')]
    await append_after(store, 'c', 'zoo', history, [user('repeat the other answer'), FIRST])
    assert await found(store, 'zebra') == [(5, 'first')]
    before = await answers(store)
    assert await store.reindex() == 6
    assert await answers(store) == before
    assert (await store.check()).clean
    assert await problems_of(store) == []


async def test_a_fork_keeps_its_own_membership(recall_store: AnyStore) -> None:
    store = recall_store
    await append_after(store, 'c', 'zoo', [], [QUESTION, FIRST])
    await store.fork('c', new_conversation_id='f', scope='zoo')
    await answered_twice(store, 'c', 'zoo', *TEXTS)
    assert await found(store, 'zebra') == [(1, 'first')]  # written before the retry, by another write: said
    await answered_twice(store, 'd', 'zoo', *TEXTS)
    await store.fork('d', new_conversation_id='g', scope='zoo')
    in_d = SearchRequest(query='zebra', conversation_id='d', scope='zoo')
    assert (await search_index(store, in_d)).hits == []
    # The fork of `d` was made from its head, which never held the replaced answer.
    in_g = SearchRequest(query='zebra giraffe', conversation_id='g', scope='zoo')
    assert [hit.excerpt for hit in (await search_index(store, in_g)).hits] == [TEXTS[2]]
    everywhere = SearchRequest(query='zebra', scope='zoo', all_conversations=True)
    # `c` and its fork share the entry: one hit, where the document first appeared; `d`'s is superseded.
    assert [hit.conversation_id for hit in (await search_index(store, everywhere)).hits] == ['c']
    assert (await store.check()).clean


async def test_check_flags_a_wrong_mark_and_counter(recall_store: AnyStore) -> None:
    store = recall_store
    await retried(store)
    assert (await store.check()).clean
    await run_sql(store, 'UPDATE conversation_documents SET superseded = NOT superseded')
    findings = [str(finding) for finding in (await store.check()).findings]
    assert (
        sum('is searchable by default, but only entries a retried request replaced hold it' in f for f in findings) == 1
    )
    assert (
        sum(
            'is marked superseded, but an entry of the conversation that no retry replaced holds it' in f
            for f in findings
        )
        == 2
    )
    await run_sql(store, 'UPDATE conversation_documents SET superseded = NOT superseded')
    await run_sql(store, 'UPDATE conversations SET document_count = document_count + 1')
    findings = [str(finding) for finding in (await store.check()).findings]
    assert len(findings) == 1 and "conversation 'c'" in findings[0] and 'counts 3 documents' in findings[0], findings


async def test_a_save_of_a_shorter_history_keeps_the_cut_turns_in_recall(recall_store: AnyStore) -> None:
    """`save` of a history cut back (an application undoing its last turn, a client resending part of its
    history) moves the head to an earlier entry; what the cut turns said stays found."""
    store = recall_store
    await append_after(store, 'c', 'zoo', [], [QUESTION, FIRST, user('and the penguins?'), reply('penguins at noon')])
    assert await found(store, 'penguins') == [(2, 'and the penguins?'), (3, 'penguins at noon')]
    loaded = await store.load('c', scope='zoo')
    assert loaded is not None
    del loaded.messages[2:]
    await store.save(loaded)
    assert await found(store, 'penguins') == [(2, 'and the penguins?'), (3, 'penguins at noon')]
    assert await found(store, 'zebra') == [(1, 'first')]
    before = await answers(store)
    assert await store.reindex() == 4
    assert await answers(store) == before
    assert (await store.check()).clean


async def aged_store(store: AnyStore) -> None:
    """What main wrote before version 12: a retried answer, a rewritten answer, a cut history."""
    await retried(store)
    await answered_again(store, 'rewritten', 'zoo', *TEXTS)
    await append_after(store, 'cut', 'zoo', [], [user('penguins at noon?'), reply('yes, penguins at noon')])
    loaded = await store.load('cut', scope='zoo')
    assert loaded is not None
    del loaded.messages[1:]
    await store.save(loaded)


async def test_a_version_11_store_upgrades_to_superseded_marks(site: Site, caplog: pytest.LogCaptureFixture) -> None:
    """A store of version 11 (whose default search saw only each conversation's current history) upgrades
    once, with progress: text its conversations left on branches is found again, the retried answer not."""
    store = await site.open()
    try:
        await aged_store(store)
        expected = await answers(store)
        await back_to_version_11(store)
    finally:
        await store.close()
    store, progress = await reopened_logging(site, caplog)
    try:
        assert progress, 'the upgrade reports its progress'
        assert all('12 (search sees every branch' in line for line in progress)
        assert progress[-1].endswith('reindexing, 8 of 8 entries done.')
        assert max(await column_of(store, 'SELECT version FROM schema_migrations')) == latest_version()
        assert await column_of(store, 'SELECT count(*) FROM superseded_entries') == [1]
        assert await answers(store) == expected
        assert await found(store, 'zebra') == []
        assert await found(store, 'zebra', include_superseded=True) == [(1, 'first')]
        rewritten = SearchRequest(query='zebra', conversation_id='rewritten', scope='zoo')
        assert [hit.position for hit in (await search_index(store, rewritten)).hits] == [1]
        cut = SearchRequest(query='penguins', conversation_id='cut', scope='zoo')
        assert [hit.position for hit in (await search_index(store, cut)).hits] == [0, 1]
        report = await store.check()
        assert report.clean, report.findings
        assert await problems_of(store) == []
    finally:
        await store.close()


async def test_a_version_9_store_is_reindexed_into_superseded_marks(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    """A store of version 9 upgrades with progress, and then answers as a store written by this release."""
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


def test_the_model_facing_request_leaves_superseded_text_out() -> None:
    assert SearchRequest(query='x', conversation_id='c').include_superseded is False
    assert SearchTarget(scope=None, conversation_id='c').include_superseded is False


def test_the_old_spelling_still_works_with_a_deprecation_warning() -> None:
    with pytest.warns(DeprecationWarning, match='`include_branches` is renamed `include_superseded`'):
        old = SearchRequest(query='x', conversation_id='c', include_branches=True)  # type: ignore[call-arg]
    assert old.include_superseded is True
    with pytest.warns(DeprecationWarning, match='`include_branches` is renamed `include_superseded`'):
        target = SearchTarget(scope=None, conversation_id='c', include_branches=True)
    assert target.include_superseded is True
    # A payload a history recorded with the old field decodes silently, to the same request.
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        decoded = SearchRequest.model_validate_json('{"query": "x", "conversation_id": "c", "include_branches": true}')
    assert decoded.include_superseded is True
