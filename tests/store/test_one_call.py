"""An append in one call (`store/log/_one_call.py`, PostgreSQL): it stores exactly what the general append
stores, takes one call when the append is plain, and leaves to the general append what it cannot apply."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from pydantic_ai import messages as m
from pydantic_ai.usage import RunUsage

from temporal_recall.errors import UnknownConversation
from temporal_recall.models import SearchRequest
from temporal_recall.search.plan import search_index
from temporal_recall.store import AppendRequest, Fence, PostgresConversationStore
from temporal_recall.store.log import _one_call
from temporal_recall.store.postgres._connection import PostgresSession
from temporal_recall.store.postgres._dialect import POSTGRESQL

from ._support import (
    AT,
    PostgresSite,
    hex_hash,
    postgres_url,
    problems_of,
    reply,
    rows_of,
    run_sql,
    tool_call,
    tool_return,
    user,
)

pytestmark = pytest.mark.postgres

_TABLES = {
    'entries': 'SELECT entry_key, parent_key, position, kind, content_hash, run_key, message, unindexed '
    'FROM entries ORDER BY entry_key',
    'documents': 'SELECT doc_id, tenant_id, content_hash, length, term_ids, role FROM documents ORDER BY doc_id',
    'members': 'SELECT conv_key, doc_id, entry_key, run_key, position, occurrences, superseded '
    'FROM conversation_documents ORDER BY conv_key, doc_id',
    'pending': 'SELECT tenant_id, segment, term_id, first_doc, last_doc, postings FROM pending_postings '
    'ORDER BY tenant_id, segment, term_id, first_doc',
    'segments': 'SELECT * FROM index_segments ORDER BY tenant_id, segment',
    'applied': 'SELECT conv_key, idempotency_key, head_key, length, stored FROM applied_writes '
    'ORDER BY conv_key, idempotency_key',
    'conversations': 'SELECT conv_key, conversation_id, tenant_id, scope, head_key, usage, document_count, '
    'total_length, created_seq FROM conversations ORDER BY conv_key',
    'branches': 'SELECT * FROM conversation_branches ORDER BY conv_key, ordinal',
    'terms': 'SELECT term, term_id FROM terms ORDER BY term_id',
    'runs': 'SELECT run_id, run_key FROM runs ORDER BY run_key',
}
"""Every row an append writes, without what each store mints (entry ids, revisions' random parts, times)."""


@pytest.fixture
async def sites() -> AsyncIterator[tuple[PostgresSite, PostgresSite]]:
    url = postgres_url()
    pair = (PostgresSite(url), PostgresSite(url))
    try:
        yield pair
    finally:
        for site in pair:
            await site.close()


class Calls:
    """Counts the one-call appends a test's stores send, and what the function answered."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.answers: list[Any] = []
        original: Callable[..., Any] = PostgresSession.value

        async def value(session: PostgresSession, sql: str, *params: Any) -> Any:
            answer = await original(session, sql, *params)
            if sql.startswith('SELECT temporal_recall_append('):
                self.answers.append(answer)
            return answer

        monkeypatch.setattr(PostgresSession, 'value', value)

    @property
    def applied(self) -> int:
        return sum(answer is not None for answer in self.answers)

    @property
    def declined(self) -> int:
        return sum(answer is None for answer in self.answers)


def _request(
    messages: list[m.ModelMessage], before: list[m.ModelMessage], *, key: str, **options: Any
) -> AppendRequest:
    return AppendRequest(
        conversation_id=options.pop('conversation_id', 'c'),
        scope=options.pop('scope', 'acme'),
        idempotency_key=key,
        base_length=len(before),
        base_hash=hex_hash(before[-1]) if before else None,
        messages=messages,
        **options,
    )


def _steps(suffix: str) -> list[tuple[list[m.ModelMessage], dict[str, Any]]]:
    """A run's steps as the capability writes them, with usage, fences, a tool round trip, words said
    again, a message of two speakers (a tool return beside a user prompt) and one without a word to
    index; each conversation's contents its own (`suffix`), except one answer every conversation gives."""
    call = tool_call('lookup', {'order': f'A-1042 {suffix}'}, 't1')
    both = m.ModelRequest(
        parts=[
            *tool_return('lookup', f'parcel at the depot {suffix}', 't1').parts,
            m.UserPromptPart(f'refund {suffix}?', timestamp=AT),
        ],
        timestamp=AT,
    )
    return [
        ([user(f'where is my order A-1042 {suffix}')], {}),
        ([call], {'usage': RunUsage(requests=1, input_tokens=10, output_tokens=4)}),
        ([both], {'fence': Fence(key=f'wf/{suffix}/2', attempt=1)}),
        ([reply('the parcel is at the depot; the refund is on its way')], {'usage': RunUsage(requests=1)}),
        ([user(f'thanks, and the invoice {suffix}?'), reply(f'the invoice is in your account {suffix}')], {}),
        ([m.ModelRequest(parts=[m.UserPromptPart('', timestamp=AT)], timestamp=AT)], {'run_id': f'run-{suffix}-2'}),
    ]


async def _write(store: PostgresConversationStore) -> list[Any]:
    results: list[Any] = []
    for conversation_id in ('c', 'd'):
        history: list[m.ModelMessage] = []
        for number, (messages, options) in enumerate(_steps(conversation_id)):
            request = _request(
                messages,
                history,
                key=f'{conversation_id}-{number}',
                conversation_id=conversation_id,
                **{'run_id': f'run-{conversation_id}', **options},
            )
            results.append(await store.append(request))
            history += messages
    return results


async def _tables(store: PostgresConversationStore) -> dict[str, list[tuple[Any, ...]]]:
    return {name: await rows_of(store, sql) for name, sql in _TABLES.items()}


async def test_plain_appends_take_one_call_and_store_what_the_general_append_stores(
    sites: tuple[PostgresSite, PostgresSite], monkeypatch: pytest.MonkeyPatch
) -> None:
    one_call, general = sites
    calls = Calls(monkeypatch)
    async with await one_call.open() as store:
        results = await _write(store)
        tables = await _tables(store)
        hits = await search_index(
            store, SearchRequest(query='refund invoice parcel', scope='acme', limit=20, all_conversations=True)
        )
        assert await problems_of(store) == []
        assert (await store.check()).clean
    # Every step but the scope's first (its tenant is new) went in one call: `d`'s creation, new words
    # and a new run's first step too; but the answer `d` gives again (its content has a document
    # already), which the call found and left to the general append.
    assert (calls.applied, calls.declined) == (10, 1)
    monkeypatch.setattr(POSTGRESQL, 'appends_in_one_call', False)
    calls.answers.clear()
    async with await general.open() as store:
        expected = await _write(store)
        assert calls.answers == []
        assert await _tables(store) == tables
        again = await search_index(
            store, SearchRequest(query='refund invoice parcel', scope='acme', limit=20, all_conversations=True)
        )
    assert [(r.length, r.stored) for r in results] == [(r.length, r.stored) for r in expected]
    assert [(hit.conversation_id, hit.score) for hit in hits.hits] == [
        (hit.conversation_id, hit.score) for hit in again.hits
    ]


async def test_what_changed_after_the_read_goes_to_the_general_append(
    sites: tuple[PostgresSite, PostgresSite], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer appends between the read and the call: the call writes nothing, and the general
    append branches, as it would have without the one call."""
    site, _ = sites
    calls = Calls(monkeypatch)
    prompt, answer = user('where is my order, at the depot or in the van'), reply('at the depot')
    async with await site.open() as store, await site.open() as other:
        await store.append(_request([prompt], [], key='p'))
        original = _one_call._read  # pyright: ignore[reportPrivateUsage]
        reads: list[bool] = []

        async def read(*args: Any) -> Any:
            found = await original(*args)
            if not reads:  # the one call's read: another writer's turn
                reads.append(True)
                await other.append(_request([reply('in the van')], [prompt], key='other'))
            return found

        monkeypatch.setattr(_one_call, '_read', read)
        result = await store.append(_request([answer], [prompt], key='mine'))
        assert (calls.applied, calls.declined) == (1, 1)  # the other writer's call, then ours, declined
        assert result.stored == 1 and result.length == 2
        loaded = await store.load('c')
        assert loaded is not None and loaded.messages == [prompt, answer]
        record = await store.read_record('c')
        assert record is not None and len(record.branches) == 1
        assert (await store.check()).clean


async def test_keys_that_are_not_consecutive_go_to_the_general_append(
    sites: tuple[PostgresSite, PostgresSite], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The blocks were encoded for consecutive keys: with keys drawn apart, the call writes nothing."""
    site, _ = sites
    calls = Calls(monkeypatch)
    async with await site.open() as store:
        await store.append(_request([user('where is my order')], [], key='p'))  # its words new: no call
        await run_sql(store, 'ALTER SEQUENCE entries_entry_key_seq INCREMENT BY 2')
        two = [reply('at the depot'), user('and the invoice?')]
        result = await store.append(_request(two, [user('where is my order')], key='two'))
        one = await store.append(
            _request([reply('the invoice is in your account')], [user('where is my order'), *two], key='one')
        )
        assert (calls.applied, calls.declined) == (1, 1)  # two messages: keys apart; one message: one key
        assert (result.stored, one.stored, one.length) == (2, 1, 4)
        assert (await store.check()).clean
        assert await problems_of(store) == []
        found = await search_index(store, SearchRequest(query='invoice', scope='acme', conversation_id='c'))
        assert sorted(hit.position for hit in found.hits) == [2, 3]


async def test_what_another_process_wrote_since_this_one_appended_goes_to_the_general_append(
    sites: tuple[PostgresSite, PostgresSite], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process knows the conversation as its own last append left it (no read); another process appended
    since: the call writes nothing, and the general append applies the write as if nothing were known."""
    site, _ = sites
    calls = Calls(monkeypatch)
    prompt = user('where is my order, at the depot or in the van')
    async with await site.open() as mine, await site.open() as theirs:
        await theirs.append(_request([user('a tenant for the scope')], [], key='t', conversation_id='t'))
        await mine.append(_request([prompt], [], key='p'))  # created in one call: `mine` knows `c` now
        await theirs.append(_request([reply('in the van')], [prompt], key='other'))
        result = await mine.append(_request([reply('at the depot')], [prompt], key='mine'))
        assert (calls.applied, calls.declined) == (2, 1)  # `theirs` created the tenant: no call
        assert (result.stored, result.length) == (1, 2)
        record = await mine.read_record('c')
        assert record is not None and len(record.branches) == 1
        again = await mine.append(_request([user('and the van?')], [prompt, reply('at the depot')], key='next'))
        assert (calls.applied, calls.declined, again.length) == (2, 1, 3)  # read again: a kept branch, no call
        assert (await mine.check()).clean
        assert await problems_of(mine) == []


async def test_a_process_reads_again_what_another_appended_since_and_still_takes_one_call(
    sites: tuple[PostgresSite, PostgresSite], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers take turns on a conversation's steps: one whose known head another process has since moved
    reads the conversation again rather than leaving the write to the general append. A word this
    process has not seen but the store has costs no read: its id comes back with the interning of the
    new ones, unchanged."""
    site, _ = sites
    calls = Calls(monkeypatch)
    original = _one_call._read  # pyright: ignore[reportPrivateUsage]
    reads: list[str] = []

    async def read(session: Any, prepared: Any, *args: Any) -> Any:
        reads.append(prepared.request.idempotency_key)
        return await original(session, prepared, *args)

    monkeypatch.setattr(_one_call, '_read', read)
    prompt, answer, again = user('where is my order'), reply('in the van'), user('my order, where is')
    async with await site.open() as mine, await site.open() as theirs:
        await theirs.append(_request([user('a tenant for the scope')], [], key='t', conversation_id='t'))
        await mine.append(_request([prompt], [], key='p'))
        await theirs.append(_request([answer], [prompt], key='a'))
        result = await mine.append(_request([again], [prompt, answer], key='q'))  # every word known here
        assert (calls.applied, calls.declined, result.length) == (3, 0, 3)
        assert reads == ['t', 'p', 'a', 'q']
        await theirs.append(_request([user('zebra crossing')], [], key='z', conversation_id='z'))
        last = await mine.append(_request([reply('by the zebra crossing')], [prompt, answer, again], key='r'))
        assert (calls.applied, calls.declined, last.length) == (5, 0, 4)
        assert reads == ['t', 'p', 'a', 'q', 'z']  # `r`: its conversation as `q` left it, and no read for its words
        record = await mine.read_record('c')
        assert record is not None and record.branches == []
        terms = await rows_of(mine, 'SELECT term, term_id FROM terms ORDER BY term_id')
        assert [term_id for _, term_id in terms] == list(range(1, len(terms) + 1))  # no key drawn twice
        assert (await mine.check()).clean
        assert await problems_of(mine) == []
        found = await search_index(mine, SearchRequest(query='zebra', scope='acme', conversation_id='c'))
        assert [hit.position for hit in found.hits] == [3]


async def test_another_scope_answers_as_absent_whatever_the_process_knows(
    sites: tuple[PostgresSite, PostgresSite], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scope comes from the request: a process that knows the conversation in its own scope never
    applies another scope's write to it, and the answer is the general append's: no such conversation."""
    site, _ = sites
    calls = Calls(monkeypatch)
    prompt = user('where is my order')
    async with await site.open() as store:
        await store.append(_request([user('a tenant for the scope')], [], key='t', conversation_id='t'))
        await store.append(_request([prompt], [], key='p'))
        counts = await rows_of(store, 'SELECT count(*) FROM entries')
        for scope in ('globex', None, ''):
            with pytest.raises(UnknownConversation):
                await store.append(_request([reply('at the depot')], [prompt], key=f'x-{scope}', scope=scope))
        assert await rows_of(store, 'SELECT count(*) FROM entries') == counts
        assert (calls.applied, calls.declined) == (1, 0)


def test_known_conversations_and_terms_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_one_call, 'KNOWN_CONVERSATIONS', 2)
    monkeypatch.setattr(_one_call, 'KNOWN_TERMS', 3)
    known = _one_call.Known()
    state = _one_call._Conversation(  # pyright: ignore[reportPrivateUsage]
        conv_key=1, tenant_id=1, scope=None, head_key=1, head_position=0, head_hash=b'', revision='r', usage='u'
    )
    known.learn('a', state, {'x': 1})
    known.learn('b', state, {'y': 2})
    assert known.conversation('a') is state  # now the most recent
    known.learn('c', state, {'z': 3})
    assert (known.conversation('b'), known.conversation('a')) == (None, state)
    known.learn('d', state, {'w': 4})  # past three terms: started again
    assert known.terms == {'w': 4}
    known.forget('a')
    assert known.conversation('a') is None and known.terms == {}
