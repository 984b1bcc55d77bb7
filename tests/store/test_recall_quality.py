"""What recall finds, on both backends: every occurrence, every part that carries words, every language.

Messages are written the way applications write them: through the capability on a plain
`agent.run` (with `FunctionModel`), or through the store's `append`/`save`/`fork`, and searched
through `search_index`, which every interface (the model's tool, `recall`, the Update, the CLI and
the HTTP API) runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai import messages as m
from pydantic_ai.conversation import Conversation
from pydantic_ai.models.function import AgentInfo, FunctionModel

from temporal_recall import ConversationRecall
from temporal_recall.content import content_hash
from temporal_recall.errors import UnknownConversation
from temporal_recall.models import SearchRequest
from temporal_recall.search import SearchResult
from temporal_recall.search.plan import search_index
from temporal_recall.store import AppendRequest
from temporal_recall.text._documents import SUMMARY_METADATA

from ..search._multilingual import CORPUS, QUERIES
from ._support import AT, AnyStore, reply, tool_call, tool_return, user


async def find(store: AnyStore, query: str, conversation_id: str | None = 'c', **options: Any) -> SearchResult:
    return await search_index(
        store,
        SearchRequest(
            query=query,
            conversation_id=conversation_id,
            all_conversations=conversation_id is None,
            scope=options.pop('scope', None),
            **options,
        ),
    )


def places(result: SearchResult) -> list[tuple[str, int]]:
    return [(hit.conversation_id, hit.position) for hit in result.hits]


async def append(
    store: AnyStore,
    conversation_id: str,
    history: Sequence[m.ModelMessage],
    new: Sequence[m.ModelMessage],
    key: str,
    run_id: str | None = None,
    scope: str | None = None,
) -> None:
    await store.append(
        AppendRequest(
            conversation_id=conversation_id,
            scope=scope,
            idempotency_key=key,
            base_length=len(history),
            base_hash=content_hash(history[-1]) if history else None,
            messages=list(new),
            run_id=run_id,
        )
    )


def numbered_replies() -> FunctionModel:
    """A model whose every reply is different, so only the prompts repeat."""
    words = iter(['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot'])

    def answer(messages: list[m.ModelMessage], info: AgentInfo) -> m.ModelResponse:
        return m.ModelResponse(parts=[m.TextPart(f'reply {next(words)}')])

    return FunctionModel(answer)


# --- every occurrence --------------------------------------------------------------------------


async def test_the_issues_repeated_message_is_a_hit_at_each_position(recall_store: AnyStore) -> None:
    """The issue's three messages: a prompt, the same prompt again, the answer."""
    repeated = user('repeat this exactly')
    await append(recall_store, 'c', [], [repeated, repeated, reply('done')], 'k1', run_id='r1')

    entries = await recall_store.load_entries('c')
    assert entries is not None and len(entries) == 3
    result = await find(recall_store, 'repeat this exactly', context_lines=1)
    assert places(result) == [('c', 0), ('c', 1)]
    assert result.hits[0].score == result.hits[1].score
    assert [hit.entry_id for hit in result.hits] == [entries[0].id, entries[1].id]
    # Each has its own neighbours; a position shown as a hit is not repeated as context.
    assert [[n.position for n in hit.context] for hit in result.hits] == [[], [2]]


async def test_repeats_across_runs_are_hits_and_resent_copies_are_not(recall_store: AnyStore) -> None:
    agent = Agent(numbered_replies(), capabilities=[ConversationRecall(store=recall_store)])
    first = await agent.run('where is parcel 77?', conversation_id='c')
    # The second run re-sends the first run's messages (copies), then repeats the question.
    second = await agent.run('where is parcel 77?', conversation_id='c', message_history=first.all_messages())
    entries = await recall_store.load_entries('c')
    assert entries is not None and len(entries) == 4

    result = await find(recall_store, 'parcel 77', context_lines=1)
    assert places(result) == [('c', 0), ('c', 2)]
    assert [hit.run_id for hit in result.hits] == [first.run_id, second.run_id]
    assert [[n.position for n in hit.context] for hit in result.hits] == [[1], [3]]
    assert places(await find(recall_store, 'alpha')) == [('c', 1)]  # the re-sent reply: once
    # `limit` counts occurrences.
    assert places(await find(recall_store, 'parcel 77', limit=1)) == [('c', 0)]


async def test_copies_on_a_branch_the_conversation_left_are_one_hit(recall_store: AnyStore) -> None:
    old = [user('the launch moves to Thursday'), reply('noted, Thursday it is'), user('and the budget?')]
    await append(recall_store, 'c', [], old, 'k1')
    # The history is rewritten at position 1 (a compaction, a trim): the store branches there and
    # stores the later messages again, as copies.
    rewritten = [old[0], reply('understood, the launch is Thursday'), old[2], reply('the budget is 4000')]
    await append(recall_store, 'c', [], rewritten, 'k2')

    assert places(await find(recall_store, 'budget')) == [('c', 2), ('c', 3)]
    assert places(await find(recall_store, 'budget', include_superseded=True)) == [('c', 2), ('c', 3)]
    # Said only on the branch left behind: still said, and found once, where it was said.
    assert places(await find(recall_store, 'noted')) == [('c', 1)]
    assert places(await find(recall_store, 'noted', conversation_id=None)) == [('c', 1)]
    assert places(await find(recall_store, 'noted', include_superseded=True)) == [('c', 1)]


async def test_a_fork_shares_its_occurrences_in_a_scope_wide_search(recall_store: AnyStore) -> None:
    history = [user('ticket TK-9 again'), reply('looking'), user('ticket TK-9 again')]
    await recall_store.save(Conversation(messages=history, conversation_id='c'))
    await recall_store.fork('c', new_conversation_id='f')

    assert places(await find(recall_store, 'TK-9')) == [('c', 0), ('c', 2)]
    assert places(await find(recall_store, 'TK-9', conversation_id='f')) == [('f', 0), ('f', 2)]
    assert places(await find(recall_store, 'TK-9', conversation_id=None)) == [('c', 0), ('c', 2)]


async def test_occurrences_stay_in_the_searched_scope(recall_store: AnyStore) -> None:
    await append(recall_store, 'mine', [], [user('secret plan'), reply('ok'), user('secret plan')], 'k1', scope='a')
    await append(recall_store, 'theirs', [], [user('secret plan'), reply('fine'), user('secret plan')], 'k2', scope='b')

    assert places(await find(recall_store, 'secret plan', conversation_id='mine', scope='a')) == [
        ('mine', 0),
        ('mine', 2),
    ]
    assert places(await find(recall_store, 'secret plan', conversation_id=None, scope='a')) == [
        ('mine', 0),
        ('mine', 2),
    ]
    with pytest.raises(UnknownConversation):  # exactly as for a conversation that does not exist
        await find(recall_store, 'secret plan', conversation_id='theirs', scope='a')


async def test_a_run_filter_and_an_excluded_run_apply_to_each_occurrence(recall_store: AnyStore) -> None:
    said = user('order A-77 please')
    await append(recall_store, 'c', [], [said, reply('one')], 'k1', run_id='r1')
    await append(recall_store, 'c', [said, reply('one')], [said, reply('two')], 'k2', run_id='r2')

    assert places(await find(recall_store, 'A-77')) == [('c', 0), ('c', 2)]
    assert places(await find(recall_store, 'A-77', exclude_run_id='r2')) == [('c', 0)]
    assert places(await find(recall_store, 'A-77', exclude_run_id='r1')) == [('c', 2)]
    assert places(await find(recall_store, 'A-77', run_id='r1')) == [('c', 0)]
    # r2 said it again: first said in r1, the words are still r2's too, in the conversation and scope-wide.
    assert places(await find(recall_store, 'A-77', run_id='r2')) == [('c', 2)]
    assert places(await find(recall_store, 'A-77', conversation_id=None, run_id='r2')) == [('c', 2)]


async def test_a_run_filter_finds_what_the_run_repeated_and_only_in_its_conversation(recall_store: AnyStore) -> None:
    said = user('order A-77 please')
    await append(recall_store, 'c', [], [said, reply('one')], 'k1', run_id='r1')
    await append(recall_store, 'c', [said, reply('one')], [said, reply('one')], 'k2', run_id='r2')  # repeats only
    await append(recall_store, 'other', [], [said, reply('one')], 'k3', run_id='r3')
    await recall_store.fork('c', new_conversation_id='f')

    only_repeats = await find(recall_store, 'A-77 one', run_id='r2')
    assert places(only_repeats) == [('c', 2), ('c', 3)]
    assert only_repeats.searched_documents == 2, 'the run said two documents, both first said in r1'
    assert places(await find(recall_store, 'A-77', conversation_id='f', run_id='r2')) == [('f', 2)]
    assert places(await find(recall_store, 'A-77', run_id='r3')) == [], "r3 is another conversation's run"
    assert places(await find(recall_store, 'A-77', conversation_id='other', run_id='r3')) == [('other', 0)]
    assert places(await find(recall_store, 'A-77', conversation_id='other', run_id='r2')) == []


# --- summaries --------------------------------------------------------------------------------

HARNESS = 'Summary of previous conversation:\n\nThe user asked about the ZEBRA shipment.'


@pytest.mark.parametrize(
    'summary',
    [
        pytest.param(m.ModelRequest(parts=[m.CompactionPart(content='About the ZEBRA shipment.')]), id='compaction'),
        pytest.param(m.ModelRequest(parts=[m.SystemPromptPart(HARNESS)]), id='harness-system-prompt'),
        pytest.param(
            m.ModelRequest(parts=[m.UserPromptPart([m.TextContent(HARNESS, metadata=dict(SUMMARY_METADATA))])]),
            id='harness-marked-user-turn',
        ),
    ],
)
async def test_each_summary_shape_is_left_out_and_the_original_is_found(
    recall_store: AnyStore, summary: m.ModelMessage
) -> None:
    original = [user('where is the ZEBRA shipment?'), reply('it left Lyon')]
    await append(recall_store, 'c', [], original, 'k1')
    await append(recall_store, 'c', original, [summary, user('thanks'), reply('you are welcome')], 'k2')

    assert places(await find(recall_store, 'zebra')) == [('c', 0)]


async def test_a_summary_shape_declared_by_the_application_is_left_out_even_after_a_reindex(
    recall_store: AnyStore,
) -> None:
    """The application's model writes digests marked `[digest]`; its rule keeps them out, for good."""

    def digest(message: m.ModelMessage) -> bool:
        return any(isinstance(part, m.TextPart) and part.content.startswith('[digest]') for part in message.parts)

    def model(messages: list[m.ModelMessage], info: AgentInfo) -> m.ModelResponse:
        return m.ModelResponse(parts=[m.TextPart('[digest] the user asked where the ZEBRA shipment is')])

    agent = Agent(FunctionModel(model), capabilities=[ConversationRecall(store=recall_store, summary=digest)])
    await agent.run('where is the ZEBRA shipment?', conversation_id='c')
    entries = await recall_store.load_entries('c')
    assert entries is not None and len(entries) == 2  # stored, both

    assert places(await find(recall_store, 'zebra')) == [('c', 0)]
    await recall_store.reindex()
    assert places(await find(recall_store, 'zebra')) == [('c', 0)]
    await recall_store.fork('c', new_conversation_id='f')
    assert places(await find(recall_store, 'zebra', conversation_id='f')) == [('f', 0)]


async def test_a_system_prompt_that_only_looks_like_a_summary_stays_found(recall_store: AnyStore) -> None:
    lookalike = m.ModelRequest(
        parts=[m.SystemPromptPart('Summary of previous conversation: the ONYX migration is done.')]
    )
    await append(recall_store, 'c', [], [lookalike, user('carry on'), reply('ok')], 'k1')

    result = await find(recall_store, 'ONYX')
    assert places(result) == [('c', 0)]
    assert result.hits[0].role == 'system'


# --- every part that carries words ------------------------------------------------------------


async def test_speech_tool_names_and_text_attachments_are_found(recall_store: AnyStore) -> None:
    notes = m.BinaryContent(data=b'Minutes: the launch moves to Thursday.', media_type='text/markdown')
    image = m.BinaryContent(data=b'\x89PNG secretpixels', media_type='image/png')
    messages: list[m.ModelMessage] = [
        m.ModelRequest(parts=[m.SpeechPart(speaker='user', transcript='please call me at noon')]),
        m.ModelResponse(parts=[m.SpeechPart(speaker='assistant', transcript='I will call at noon')]),
        m.ModelRequest(parts=[m.UserPromptPart(['see the minutes', notes, image])]),
        tool_call('get_weather', {'city': 'Paris'}, 'call-1'),
        tool_return('get_weather', 'sunny', 'call-1'),
        m.ModelResponse(parts=[m.ThinkingPart('private musing'), m.TextPart('done')]),
    ]
    await append(recall_store, 'c', [], messages, 'k1')

    assert sorted(places(await find(recall_store, 'noon'))) == [('c', 0), ('c', 1)]
    assert places(await find(recall_store, 'Thursday')) == [('c', 2)]
    assert sorted(places(await find(recall_store, 'get_weather'))) == [('c', 3), ('c', 4)]
    assert (await find(recall_store, 'secretpixels')).hits == []
    assert (await find(recall_store, 'musing')).hits == []


# --- role filter ------------------------------------------------------------------------------


async def test_a_role_filter_returns_only_that_roles_messages(recall_store: AnyStore) -> None:
    messages: list[m.ModelMessage] = [
        m.ModelRequest(parts=[m.SystemPromptPart('an invoice is due monthly')]),
        user('where is my invoice?'),
        tool_call('lookup_invoice', {'q': 'invoice'}, 'call-1'),
        tool_return('lookup_invoice', 'invoice 7 is paid', 'call-1'),
        reply('your invoice is paid'),
    ]
    await append(recall_store, 'c', [], messages, 'k1', scope='s')
    everything = await find(recall_store, 'invoice', scope='s')
    assert sorted(hit.position for hit in everything.hits) == [0, 1, 2, 3, 4]
    scores = {hit.position: hit.score for hit in everything.hits}

    for role, expected in (('user', [1]), ('assistant', [2, 4]), ('tool', [3]), ('system', [0])):
        for conversation_id in ('c', None):
            result = await find(recall_store, 'invoice', conversation_id=conversation_id, scope='s', role=role)
            assert sorted(hit.position for hit in result.hits) == expected, (role, conversation_id)
            assert {hit.role for hit in result.hits} == {role}
            assert all(hit.score == scores[hit.position] for hit in result.hits)


# --- every language ---------------------------------------------------------------------------


async def test_a_multilingual_corpus_is_found_in_every_script(recall_store: AnyStore) -> None:
    keys = list(CORPUS)
    messages: list[m.ModelMessage] = [user(CORPUS[key], at=AT) for key in keys]
    await recall_store.save(Conversation(messages=messages, conversation_id='c'))
    for query, expected in QUERIES:
        result = await find(recall_store, query)
        assert result.hits, query
        assert result.hits[0].position == keys.index(expected), query
        assert result.hits[0].excerpt == CORPUS[expected]


async def test_the_models_tool_takes_a_role(recall_store: AnyStore) -> None:
    """The tool's `role` argument reaches the query: only the user's words come back."""
    # The system prompt in the request of the first user prompt, as pydantic-ai sends it: a request of
    # its own would be merged into the next one by the run, rewriting the history it was given.
    said = [
        m.ModelRequest(parts=[m.SystemPromptPart('the invoice policy: monthly'), *user('hello').parts]),
        reply('hello, how can I help?'),
        user('my invoice 7 is late'),
        reply('invoice 7 was paid yesterday'),
    ]
    await append(recall_store, 'c', [], said, 'k1', run_id='earlier')

    def model(messages: list[m.ModelMessage], info: AgentInfo) -> m.ModelResponse:
        last = messages[-1]
        returned = [part for part in last.parts if isinstance(part, m.ToolReturnPart)]
        if returned:
            return m.ModelResponse(parts=[m.TextPart(returned[0].model_response_str())])
        call = m.ToolCallPart('search_conversation_history', {'query': 'invoice', 'role': 'user'}, tool_call_id='r')
        return m.ModelResponse(parts=[call])

    agent = Agent(FunctionModel(model), capabilities=[ConversationRecall(store=recall_store)])
    history = await recall_store.load('c')
    assert history is not None
    result = await agent.run('what did I say about the invoice?', conversation_id='c', message_history=history.messages)

    # One hit, the user's; the assistant's and the system's mentions are not hits (at most context).
    assert result.output.startswith('1 earlier message matched "invoice"')
    assert '[1] position 2, user' in result.output
    assert '[2]' not in result.output
