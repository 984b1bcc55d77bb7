"""The public query module on both backends: listing, reading and searching, confined to a scope."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic_ai.messages import (
    CompactionPart,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

import temporal_recall
from temporal_recall import ANY_SCOPE, list_conversations, read_conversation, search_messages
from temporal_recall.errors import InvalidQuery, InvalidSearchParameters, UnknownConversation
from temporal_recall.query import ConversationInfo
from temporal_recall.settings import DEFAULT_STORE_URL
from temporal_recall.store import AppendRequest, PostgresConversationStore, SqliteConversationStore, open_store
from temporal_recall.text._documents import RECALL_TOOL_NAME

from .cli._support import fill_store
from .store._support import PostgresSite
from .store._support import postgres_url as configured_postgres_url

Store = SqliteConversationStore | PostgresConversationStore

RECALLED = [
    ModelRequest(parts=[UserPromptPart('What did I say about the zeppelin?')]),
    ModelResponse(parts=[ToolCallPart(RECALL_TOOL_NAME, {'query': 'zeppelin'}, tool_call_id='r1')]),
    ModelRequest(parts=[ToolReturnPart(RECALL_TOOL_NAME, 'quoted: the zeppelin lands at noon', tool_call_id='r1')]),
    ModelResponse(parts=[CompactionPart('summary: the customer asked about airships')]),
    ModelResponse(parts=[TextPart('It lands at noon.')]),
]


@pytest.fixture(scope='module', params=['sqlite', pytest.param('postgres', marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Store]:
    """The CLI tests' conversations (acme, globex, unscoped, a branch) plus one that used the recall tool."""
    site = PostgresSite(configured_postgres_url()) if request.param == 'postgres' else None
    url = site.url if site is not None else str(tmp_path_factory.mktemp('query') / 'recall.db')
    await fill_store(Path(url) if site is None else url)  # type: ignore[arg-type]  # a URL opens too
    opened = await open_store(url)
    await opened.append(
        AppendRequest(
            conversation_id='recalled-1',
            scope='acme',
            idempotency_key='recalled-1',
            base_length=0,
            base_hash=None,
            messages=RECALLED,
        )
    )
    try:
        yield opened
    finally:
        await opened.close()
        if site is not None:
            await site.close()


def test_the_query_functions_are_the_packages_public_api() -> None:
    for name in ('ANY_SCOPE', 'list_conversations', 'read_conversation', 'search_messages', 'Transcript'):
        assert name in temporal_recall.__all__
        assert getattr(temporal_recall, name) is getattr(temporal_recall.query, name)


async def test_list_conversations_by_scope(store: Store) -> None:
    everything = [c.conversation_id for c in await list_conversations(store)]
    assert sorted(everything) == ['acme-branchy', 'globex-7', 'recalled-1', 'support-42', 'unscoped-1']
    acme = await list_conversations(store, scope='acme')
    assert [c.conversation_id for c in acme] == ['recalled-1', 'acme-branchy', 'support-42'], 'newest first'
    assert {c.scope for c in acme} == {'acme'}
    assert [c.conversation_id for c in await list_conversations(store, scope='acme', limit=1)] == ['recalled-1']
    branchy = next(c for c in acme if c.conversation_id == 'acme-branchy')
    assert branchy.branches == 1 and branchy.head_id is not None


async def test_read_a_conversation_only_in_its_scope(store: Store) -> None:
    transcript = await read_conversation(store, 'support-42', scope='acme')
    assert transcript.conversation.scope == 'acme'
    assert [m.role for m in transcript.messages] == ['user', 'assistant', 'tool', 'assistant', 'user', 'assistant']
    assert transcript.messages[0].text == 'Where is my order A-1042?'
    assert [m.position for m in transcript.messages] == list(range(6))
    assert transcript.messages[-1].entry_id == transcript.conversation.head_id
    assert transcript.branches == []
    assert (await read_conversation(store, 'support-42', scope=ANY_SCOPE)).messages == transcript.messages
    assert (await read_conversation(store, 'unscoped-1', scope=None)).conversation.scope is None
    refusals: list[str] = []
    for conversation_id, scope in (('support-42', 'globex'), ('support-42', None), ('no-such', 'acme')):
        with pytest.raises(UnknownConversation) as refused:
            await read_conversation(store, conversation_id, scope=scope)
        refusals.append(str(refused.value).replace(conversation_id, 'ID'))
    assert len(set(refusals)) == 1, 'another scope answers exactly like a missing conversation'


async def test_a_transcript_shows_the_recall_tools_returns_and_summaries(store: Store) -> None:
    texts = [m.text for m in (await read_conversation(store, 'recalled-1', scope='acme')).messages]
    assert any('quoted: the zeppelin lands at noon' in text for text in texts)
    assert 'summary: the customer asked about airships' in texts
    found = await search_messages(store, 'airships noon', conversation_id='recalled-1', scope='acme')
    assert [hit.excerpt for hit in found.hits] == ['It lands at noon.'], 'stored and shown, but not indexed'


async def test_read_the_branches_a_conversation_left(store: Store) -> None:
    transcript = await read_conversation(store, 'acme-branchy', scope='acme', branches=True)
    assert transcript.messages[0].text == 'Actually, resend invoice INV-8800 instead'
    [branch] = transcript.branches
    assert branch.messages[0].text == 'Please resend invoice INV-7731'
    assert branch.tip == branch.messages[-1].entry_id


async def test_search_in_a_scope_or_under_the_stored_one(store: Store) -> None:
    scoped = await search_messages(store, 'Harbour', conversation_id='support-42', scope='acme')
    assert scoped.hits and {hit.conversation_id for hit in scoped.hits} == {'support-42'}
    anywhere = await search_messages(store, 'Harbour', conversation_id='support-42', scope=ANY_SCOPE)
    assert anywhere.hits == scoped.hits
    with pytest.raises(UnknownConversation):
        await search_messages(store, 'refund', conversation_id='globex-7', scope='acme')
    everything = await search_messages(store, 'invoice', conversation_id=None, scope='acme')
    assert {hit.conversation_id for hit in everything.hits} == {'acme-branchy'}
    assert (await search_messages(store, 'invoice', conversation_id=None, scope='initech')).hits == []
    with pytest.raises(InvalidSearchParameters, match='ANY_SCOPE'):
        await search_messages(store, 'invoice', conversation_id=None, scope=ANY_SCOPE)
    with pytest.raises(InvalidQuery):  # the query is refused before the conversation is looked up
        await search_messages(store, '  ', conversation_id='no-such', scope=ANY_SCOPE)


@pytest.fixture(params=['sqlite', pytest.param('postgres', marks=pytest.mark.postgres)])
async def tenants(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A fresh store with one conversation in each of `acme`, `globex`, `''` and no scope, and forks:
    `globex-fork` of acme's `a1`, `acme-fork` of `a1` in acme, and `orphan` of a since-deleted one."""
    site = PostgresSite(configured_postgres_url()) if request.param == 'postgres' else None
    opened = await open_store(site.url if site is not None else str(tmp_path / 'recall.db'))
    try:
        for conversation_id, scope in (('a1', 'acme'), ('g1', 'globex'), ('e1', ''), ('n1', None), ('gone', 'acme')):
            await opened.append(
                AppendRequest(
                    conversation_id=conversation_id,
                    scope=scope,
                    idempotency_key=f'{conversation_id}-1',
                    base_length=0,
                    base_hash=None,
                    messages=[ModelRequest(parts=[UserPromptPart(f'hello from {conversation_id}')])],
                )
            )
        await opened.fork('a1', new_conversation_id='globex-fork', scope='globex', source_scope='acme')
        await opened.fork('a1', new_conversation_id='acme-fork', source_scope='acme')
        await opened.fork('gone', new_conversation_id='orphan', source_scope='acme')
        await opened.delete('gone', scope='acme')
        yield opened
    finally:
        await opened.close()
        if site is not None:
            await site.close()


async def test_no_scope_is_a_tenant_of_its_own(tenants: Store) -> None:
    listed = {
        scope: [c.conversation_id for c in await list_conversations(tenants, scope=scope)] for scope in (None, '')
    }
    assert listed == {None: ['n1'], '': ['e1']}, 'None lists only what was stored without a scope'
    assert sorted(c.conversation_id for c in await list_conversations(tenants, scope='globex')) == ['g1', 'globex-fork']
    assert len(await list_conversations(tenants)) == 7, 'ANY_SCOPE is the operator view'
    with pytest.raises(UnknownConversation):
        await read_conversation(tenants, 'a1', scope=None)


async def test_a_fork_link_shows_only_where_its_reader_could_follow_it(tenants: Store) -> None:
    def links(listed: list[ConversationInfo]) -> dict[str, str | None]:
        return {c.conversation_id: c.forked_from for c in listed if c.conversation_id.endswith(('fork', 'orphan'))}

    assert links(await list_conversations(tenants, scope='acme')) == {'acme-fork': 'a1', 'orphan': None}
    assert links(await list_conversations(tenants, scope='globex')) == {'globex-fork': None}
    foreign = (await read_conversation(tenants, 'globex-fork', scope='globex')).conversation
    assert foreign.forked_from is None, "another tenant's conversation is not named, as a deleted one is not"
    assert [m.text for m in (await read_conversation(tenants, 'globex-fork', scope='globex')).messages] == [
        'hello from a1'
    ], 'the fork keeps the history it was given'
    assert links(await list_conversations(tenants)) == {'globex-fork': 'a1', 'acme-fork': 'a1', 'orphan': 'gone'}


async def test_limits_beyond_any_log_mean_all_of_it(tenants: Store) -> None:
    huge = 2**70
    assert len(await list_conversations(tenants, scope='acme', limit=huge)) == 3
    assert len(await tenants.list_conversations(limit=huge)) == 7
    record = await tenants.read_record('a1')
    assert record is not None
    assert len(await tenants.read_history(record.head_id, limit=huge)) == 1


PAGE = Path(__file__).resolve().parents[1] / 'docs' / 'concepts' / 'store.md'


async def test_the_store_pages_query_example_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import re

    found = re.search(r'<!-- query-example:start -->\n```python[^\n]*\n(.*?)```\n', PAGE.read_text(), re.S)
    assert found, 'docs/concepts/store.md lost its query example markers'
    path = tmp_path / 'recall.db'
    await fill_store(path)
    example = found.group(1)
    # The store the stock worker writes by default, so a reader who ran it finds their conversations.
    assert f"open_store('{DEFAULT_STORE_URL}')" in example, example
    body = example.replace(DEFAULT_STORE_URL, f'sqlite:///{path}').replace('delivery address', 'Harbour')
    namespace: dict[str, object] = {}
    exec('async def example():\n' + ''.join(f'    {line}\n' for line in body.splitlines()), namespace)
    await namespace['example']()  # type: ignore[operator]
    printed = capsys.readouterr().out
    assert printed.index('acme-branchy') < printed.index('support-42'), printed
    assert '[0] user: Where is my order A-1042?' in printed
    assert re.search(r'^\d\.\d\d Order A-1042 will be delivered to 12 Harbour Street', printed, re.M), printed
