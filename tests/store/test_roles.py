"""Roles per part: an agent's system prompt rides the request of the first user prompt, and each is
found under its own speaker (on both backends)."""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai import messages as m
from pydantic_ai.models.function import AgentInfo, FunctionModel

from temporal_recall import ConversationRecall
from temporal_recall.query import search_messages
from temporal_recall.text._documents import RECALL_TOOL_NAME

from ._support import ANSWER, PROMPT, SYSTEM_PROMPT, AnyStore, rows_of, run_briefed_agent


async def _found(store: AnyStore, query: str, role: str | None = None, **options: int) -> list[tuple[int, str, str]]:
    result = await search_messages(store, query, conversation_id='briefed', scope=None, role=role, **options)  # type: ignore[arg-type]
    return [(hit.position, hit.role, hit.excerpt) for hit in result.hits]


async def test_a_system_prompt_is_found_as_the_systems_words_and_never_as_the_users(recall_store: AnyStore) -> None:
    messages = await run_briefed_agent(recall_store)
    first = messages[0]
    assert isinstance(first, m.ModelRequest)
    assert [part.part_kind for part in first.parts] == ['system-prompt', 'user-prompt']  # one request, two speakers

    assert await _found(recall_store, 'courier desk', role='system') == [(0, 'system', SYSTEM_PROMPT)]
    assert await _found(recall_store, 'courier desk', role='user') == []
    assert await _found(recall_store, 'where now', role='user') == [(0, 'user', PROMPT)]
    assert await _found(recall_store, 'where now', role='system') == []
    # Without a role, each speaker's words are a hit of their own, showing only that speaker's words.
    assert sorted(await _found(recall_store, 'Wombat Z-88')) == [
        (0, 'system', SYSTEM_PROMPT),
        (0, 'user', PROMPT),
        (1, 'assistant', ANSWER),
    ]
    # A neighbour holding both speakers' words is a context line per speaker.
    result = await search_messages(
        recall_store, 'noon', conversation_id='briefed', scope=None, role='assistant', context=1
    )
    [hit] = result.hits
    assert [(line.position, line.role, line.excerpt) for line in hit.context] == [
        (0, 'system', SYSTEM_PROMPT),
        (0, 'user', PROMPT),
    ]
    report = await recall_store.check()
    assert report.clean, report.findings


async def test_reindex_reproduces_the_documents_of_each_speaker(recall_store: AnyStore) -> None:
    await run_briefed_agent(recall_store)
    await run_briefed_agent(recall_store, conversation_id='second')  # the same system prompt again
    documents = (
        'SELECT doc_id, content_hash, role, length, '
        '(SELECT count(*) FROM conversation_documents m WHERE m.doc_id = documents.doc_id) '
        'FROM documents ORDER BY doc_id'
    )
    before = await rows_of(recall_store, documents)
    assert [row[2] for row in before] == ['system', 'user', 'assistant']  # shared by both conversations
    queries = [('courier', 'system'), ('courier', 'user'), ('parcel', 'user'), ('parcel', None)]
    answers = [await _found(recall_store, query, role) for query, role in queries]
    assert await recall_store.reindex() == 3
    assert await rows_of(recall_store, documents) == before
    assert [await _found(recall_store, query, role) for query, role in queries] == answers
    report = await recall_store.check()
    assert report.clean, report.findings


async def test_the_models_recall_tool_finds_a_system_prompt_only_as_the_systems(recall_store: AnyStore) -> None:
    await run_briefed_agent(recall_store)
    for role, found in (('system', True), ('user', False)):

        def recall_then_answer(messages: list[m.ModelMessage], info: AgentInfo, role: str = role) -> m.ModelResponse:
            returns = [part for part in messages[-1].parts if isinstance(part, m.ToolReturnPart)]
            if returns:
                return m.ModelResponse(parts=[m.TextPart(returns[0].model_response_str())])
            call = m.ToolCallPart(RECALL_TOOL_NAME, {'query': 'courier desk', 'role': role}, tool_call_id='recall-1')
            return m.ModelResponse(parts=[call])

        agent = Agent(FunctionModel(recall_then_answer), capabilities=[ConversationRecall(store=recall_store)])  # type: ignore[arg-type]
        conversation = await recall_store.load('briefed')
        result = await agent.run('What were you told to be?', conversation=conversation)
        assert ('position 0, system' in result.output and SYSTEM_PROMPT in result.output) is found, result.output
        assert PROMPT not in result.output
