"""Recall by meaning through the capability on a plain `agent.run`, on both backends, with the real local model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.embeddings import Embedder, EmbeddingModel, EmbeddingResult, EmbeddingSettings, TestEmbeddingModel
from pydantic_ai.embeddings.result import EmbedInputType
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from temporal_recall import ConversationRecall
from temporal_recall.embeddings import LOCAL_MODEL
from temporal_recall.errors import EmbeddingMismatch, EmbeddingUnavailable, InvalidSearchParameters
from temporal_recall.query import search_messages
from temporal_recall.search._fusion import MEANING_FLOOR

from ..store._support import column_of

FACTS = [
    'I prefer terse replies, keep answers brief.',
    'The parcel was shipped to my office in Berlin.',
    'My order number is ZEBRA-93, the blue kettle.',
    'We are planning a hiking trip to Norway in August.',
    'My daughter has a peanut allergy, so no nuts please.',
]


def _noted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart('Noted.')])


async def tell(store: Any, conversation_id: str, facts: Sequence[str], **capability: Any) -> None:
    """One agent run per fact in one conversation, each continuing the last (the user's words are the documents)."""
    agent = Agent(FunctionModel(_noted), capabilities=[ConversationRecall(store=store, **capability)])
    history: list[ModelMessage] = []
    for fact in facts:
        result = await agent.run(fact, conversation_id=conversation_id, message_history=history)
        history = result.all_messages()


async def user_texts(store: Any, query: str, **options: Any) -> list[str]:
    result = await search_messages(store, query, role='user', **options)
    return [hit.excerpt for hit in result.hits]


async def test_a_paraphrase_is_found_by_meaning_where_bm25_misses_it(any_store: Any) -> None:
    await tell(any_store, 'support-1', FACTS, embedder=LOCAL_MODEL)
    search = {'conversation_id': 'support-1', 'scope': None, 'embedder': LOCAL_MODEL}
    question = 'delivery address for that package'
    assert FACTS[1] not in await user_texts(any_store, question, mode='bm25', **search)
    for mode in ('hybrid', 'semantic'):
        assert (await user_texts(any_store, question, mode=mode, **search))[0] == FACTS[1], mode
    hybrid = await search_messages(any_store, question, role='user', **search)
    assert hybrid.mode == 'hybrid'  # the default with an embedder
    assert hybrid.hits[0].found_by == ['semantic']
    exact = await search_messages(any_store, 'ZEBRA-93', role='user', **search)
    assert exact.hits[0].excerpt == FACTS[2] and exact.hits[0].found_by == ['bm25', 'semantic']


async def test_a_rare_exact_token_still_ranks_its_message_first(any_store: Any) -> None:
    await tell(any_store, 'support-2', FACTS, embedder=LOCAL_MODEL)
    for question in ('what was in order ZEBRA-93', 'ZEBRA-93 status of my order'):
        texts = await user_texts(any_store, question, conversation_id='support-2', scope=None, embedder=LOCAL_MODEL)
        assert texts[0] == FACTS[2], question


async def test_a_hybrid_hit_only_meaning_found_must_come_near_the_nearest_document(any_store: Any) -> None:
    """Below `MEANING_FLOOR` of the best cosine, a document meaning alone found is left out of a hybrid search
    (a semantic search still shows it); a paraphrase above it is kept, and what the words found stays."""
    await tell(any_store, 'support-3', FACTS, embedder=LOCAL_MODEL)
    search = {'conversation_id': 'support-3', 'scope': None, 'embedder': LOCAL_MODEL, 'role': 'user'}
    asked = {
        'delivery address for that package': [(FACTS[1], ['semantic'])],
        'ZEBRA-93': [(FACTS[2], ['bm25', 'semantic'])],
        'what was in order ZEBRA-93': [(FACTS[2], ['bm25', 'semantic']), (FACTS[1], ['bm25', 'semantic'])],
    }
    for question, kept in asked.items():
        near = await search_messages(any_store, question, mode='semantic', **search)
        cosine = {hit.excerpt: hit.score for hit in near.hits}
        hybrid = await search_messages(any_store, question, **search)
        shown = [(hit.excerpt, hit.found_by) for hit in hybrid.hits]
        assert shown[: len(kept)] == kept, question
        for excerpt, found_by in shown:
            assert found_by, question
            assert 'bm25' in found_by or cosine[excerpt] >= MEANING_FLOOR * near.hits[0].score, question
        below = {excerpt for excerpt, score in cosine.items() if score < MEANING_FLOOR * near.hits[0].score}
        assert below and all('bm25' in found_by for excerpt, found_by in shown if excerpt in below), question
    exact = await search_messages(any_store, 'ZEBRA-93', **search)
    assert [hit.excerpt for hit in exact.hits] == [FACTS[2]]
    words = await search_messages(any_store, 'what was in order ZEBRA-93', **search)
    assert (FACTS[3], ['bm25', 'semantic']) in [(hit.excerpt, hit.found_by) for hit in words.hits]  # a cosine below 0


async def test_each_document_is_embedded_once_per_tenant(any_store: Any) -> None:
    await tell(any_store, 'a', FACTS[:2], embedder=LOCAL_MODEL)
    await tell(any_store, 'b', FACTS[:2], embedder=LOCAL_MODEL)  # the same prompts again: no new vectors
    vectors = await column_of(any_store, 'SELECT count(*) FROM document_vectors')
    documents = await column_of(any_store, 'SELECT count(*) FROM documents')
    prompts = await column_of(any_store, "SELECT count(*) FROM document_vectors WHERE role = 'user'")
    assert vectors == documents and prompts == [2]
    assert await column_of(any_store, 'SELECT model FROM vector_space') == [LOCAL_MODEL]


async def test_search_by_meaning_never_crosses_tenants(any_store: Any) -> None:
    await tell(any_store, 'theirs', FACTS, scope='acme', embedder=LOCAL_MODEL)
    await tell(any_store, 'mine', ['I like green tea in the morning.'], scope='globex', embedder=LOCAL_MODEL)
    for mode in ('semantic', 'hybrid'):
        result = await search_messages(
            any_store, 'Where was the package delivered?', conversation_id=None, scope='globex', mode=mode,
            embedder=LOCAL_MODEL, limit=50,
        )  # fmt: skip
        assert {hit.conversation_id for hit in result.hits} == {'mine'}, mode
        other = await search_messages(
            any_store, 'Where was the package delivered?', conversation_id=None, scope='acme', mode=mode,
            embedder=LOCAL_MODEL,
        )  # fmt: skip
        assert other.hits[0].excerpt == FACTS[1]


async def test_without_an_embedder_nothing_is_embedded_and_meaning_is_refused(any_store: Any) -> None:
    await tell(any_store, 'plain', FACTS)
    assert await column_of(any_store, 'SELECT count(*) FROM document_vectors') == [0]
    with pytest.raises(InvalidSearchParameters, match='needs an embedder'):
        await search_messages(any_store, 'parcel', conversation_id='plain', scope=None, mode='semantic')
    result = await search_messages(any_store, 'parcel', conversation_id='plain', scope=None)
    assert result.mode == 'bm25' and result.hits[0].found_by == ['bm25']


class _Failing(EmbeddingModel):
    """A provider that is down."""

    @property
    def model_name(self) -> str:
        return 'down'

    @property
    def system(self) -> str:
        return 'test'

    async def embed(
        self, inputs: str | Sequence[str], *, input_type: EmbedInputType, settings: EmbeddingSettings | None = None
    ) -> EmbeddingResult:
        raise ConnectionError('connection refused by the embedding provider')


async def test_a_failing_model_writes_nothing_and_says_why(any_store: Any) -> None:
    with pytest.raises(EmbeddingUnavailable, match=r"'test:down' failed .* connection refused"):
        await tell(any_store, 'down', FACTS[:1], embedder=_Failing())
    assert await column_of(any_store, 'SELECT count(*) FROM entries') == [0]
    assert await column_of(any_store, 'SELECT count(*) FROM document_vectors') == [0]


class _Other(TestEmbeddingModel):
    """Another model of the same dimension (pydantic-ai's test model: every vector alike)."""

    def __init__(self) -> None:
        super().__init__('other', dimensions=256)


async def test_vectors_of_another_model_are_never_mixed(any_store: Any, caplog: pytest.LogCaptureFixture) -> None:
    await tell(any_store, 'one', FACTS[:2], embedder=LOCAL_MODEL)
    with pytest.raises(EmbeddingMismatch, match=f"made by '{LOCAL_MODEL}'.*recall reindex --embeddings"):
        await search_messages(any_store, 'parcel', conversation_id='one', scope=None, embedder=Embedder(_Other()))
    other = Embedder(_Other())
    await tell(any_store, 'two', ['A new fact about trains.'], embedder=other)
    assert 'stored without vectors' in caplog.text
    assert await column_of(any_store, 'SELECT DISTINCT model FROM vector_space') == [LOCAL_MODEL]
    assert (await search_messages(any_store, 'trains', conversation_id='two', scope=None)).hits  # BM25 has it


async def test_deleting_a_conversation_deletes_its_vectors(any_store: Any) -> None:
    await tell(any_store, 'kept', FACTS[:1], embedder=LOCAL_MODEL)
    await tell(any_store, 'gone', FACTS[1:3], embedder=LOCAL_MODEL)
    record = await any_store.read_record('gone')
    await any_store.delete_record('gone', expected_revision=record.revision)
    left = await column_of(any_store, 'SELECT count(*) FROM document_vectors')
    assert left == await column_of(any_store, 'SELECT count(*) FROM documents') == [2]  # 'kept': a prompt, a reply


async def test_a_scope_wide_search_sees_what_was_written_after_the_last_one(any_store: Any) -> None:
    search = {'conversation_id': None, 'scope': 'acme', 'mode': 'semantic', 'embedder': LOCAL_MODEL, 'role': 'user'}
    await tell(any_store, 'first', FACTS[:1], scope='acme', embedder=LOCAL_MODEL)
    assert [hit.excerpt for hit in (await search_messages(any_store, 'short answers', **search)).hits] == FACTS[:1]
    await tell(any_store, 'second', FACTS[1:2], scope='acme', embedder=LOCAL_MODEL)
    found = await search_messages(any_store, 'delivery address for that package', **search)
    assert [hit.excerpt for hit in found.hits] == [FACTS[1], FACTS[0]]
    record = await any_store.read_record('second')
    await any_store.delete_record('second', expected_revision=record.revision)
    assert [hit.excerpt for hit in (await search_messages(any_store, 'package', **search)).hits] == FACTS[:1]
