"""One place to name the embedding model (issue 50): a search by meaning with no embedder given uses the agent's
`ConversationRecall` embedder for its workflows' searches, then the worker's, then the model the store's vectors
were made with, built by name; the CLI and the API do the same, and where none can be had, the error names every
way to configure one. Real stores of both backends, the real offline model, a real dev server."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from pydantic_ai.conversation import Conversation
from pydantic_ai.embeddings import Embedder, EmbeddingResult, EmbeddingSettings
from pydantic_ai.embeddings.result import EmbedInputType
from pydantic_ai.messages import ModelRequest, UserPromptPart
from temporalio.client import Client

from temporal_recall import ConversationInput, ConversationWorkflow, SearchRequest, TurnInput
from temporal_recall._exit_status import EXIT_USAGE
from temporal_recall.api import create_app
from temporal_recall.content import content_hash
from temporal_recall.embeddings import LOCAL_MODEL, WordLlamaEmbeddingModel
from temporal_recall.errors import InvalidSearchParameters
from temporal_recall.query import search_messages
from temporal_recall.testing import running_worker

from ..api._http import serving
from ..cli._support import recall_async
from ..store._support import column_of
from .agents import local_agent
from .test_hybrid import FACTS, tell

FACT = FACTS[1]
QUESTION = 'delivery address for that package'
"""Shares no word with `FACT`: only its meaning finds it."""
TOKEN = 'acme-token-0123456789abcdef'

EVERY_WAY = (
    'ConversationRecall(embedder=',
    'RecallPlugin(embedder=',
    'open_store(..., embedder=',
    'search_messages(..., embedder=',
    'create_app(..., embedder=',
    'recall search --embedder',
    'TEMPORAL_RECALL_EMBEDDER',
)
"""Every way to configure an embedder, which an error finding none must name."""

UNUSABLE = 'nowhere:model-x'
"""A model name no provider answers to: what a store's vectors recorded by a model this process cannot build."""


@pytest.mark.temporal
async def test_a_conversation_workflow_searches_by_meaning_with_its_agents_embedder_alone(
    temporal_client: Client, any_store_url: str
):
    # The agent's `ConversationRecall(embedder=LOCAL_MODEL)` is the only place the model is named: the worker has none.
    async with running_worker(temporal_client, agents=[local_agent], store=any_store_url) as worker:
        handle = await temporal_client.start_workflow(
            ConversationWorkflow.run,
            ConversationInput(conversation_id='conv-local', agent='local', scope='acme'),
            id=f'conversation-{uuid.uuid4()}',
            task_queue=worker.task_queue,
        )
        for fact in FACTS:
            await handle.execute_update(ConversationWorkflow.send, TurnInput(prompt=fact))
        semantic = await handle.execute_update(
            ConversationWorkflow.search, SearchRequest(query=QUESTION, role='user', mode='semantic')
        )
        default = await handle.execute_update(ConversationWorkflow.search, SearchRequest(query=QUESTION, role='user'))
        await handle.signal(ConversationWorkflow.close)
        await handle.result()
    assert (semantic.hits[0].excerpt, semantic.hits[0].found_by) == (FACT, ['semantic'])
    assert default.mode == 'hybrid' and default.hits[0].excerpt == FACT  # the agent's embedder is an embedder

    # `recall search` on the same store: no --embedder, no TEMPORAL_RECALL_EMBEDDER (`recall_async` clears it).
    searched = await recall_async(
        *('search', 'conv-local', *QUESTION.split(), '--scope', 'acme', '--role', 'user', '--mode', 'semantic'),
        *('--format', 'json', '--store', any_store_url),
    )
    assert searched.returncode == 0, searched.stderr
    assert searched.json()['hits'][0]['excerpt'] == FACT

    # The HTTP API, created without an embedder.
    with serving(create_app(any_store_url, tokens={TOKEN: 'acme'})) as api:
        body = {'conversation_id': 'conv-local', 'query': QUESTION, 'role': 'user', 'mode': 'semantic'}
        answered = api.request('POST', '/api/v1/conversations/search', token=TOKEN, json_body=body)
    assert answered.status == 200, answered.body
    assert answered.json()['hits'][0]['excerpt'] == FACT


async def test_recall_search_by_meaning_takes_the_stores_model_without_embedder(any_store: Any, any_store_url: str):
    await tell(any_store, 'support-1', FACTS, embedder=LOCAL_MODEL)
    searched = await recall_async(
        *('search', 'support-1', *QUESTION.split(), '--role', 'user', '--mode', 'semantic'),
        *('--format', 'json', '--store', any_store_url),
    )
    assert searched.returncode == 0, searched.stderr
    assert searched.json()['hits'][0]['excerpt'] == FACT
    found = await search_messages(any_store, QUESTION, conversation_id='support-1', scope=None, mode='hybrid')
    assert found.hits[0].excerpt == FACT and found.mode == 'hybrid'
    # Not asked for meaning, a search without an embedder stays BM25: no model is built unasked.
    plain = await search_messages(any_store, 'parcel', conversation_id='support-1', scope=None)
    assert plain.mode == 'bm25'


async def test_meaning_without_any_embedder_names_every_way_to_configure_one(any_store: Any, any_store_url: str):
    await tell(any_store, 'plain', FACTS)  # no embedder anywhere: the store holds no vectors
    with pytest.raises(InvalidSearchParameters) as refused:
        await search_messages(any_store, QUESTION, conversation_id='plain', scope=None, mode='semantic')
    for way in EVERY_WAY:
        assert way in str(refused.value), way
    searched = await recall_async('search', 'plain', 'parcel', '--mode', 'semantic', '--store', any_store_url)
    assert searched.returncode == EXIT_USAGE
    assert '--embedder' in searched.stderr and 'ConversationRecall(embedder=' in searched.stderr


async def _vectors_of_an_unusable_model(store: Any) -> None:
    """Conversation `other`, its prompt's vector recorded by a model no provider here answers to (as a custom
    model or one whose package is not installed would be)."""
    await tell(store, 'other', FACTS[:1])
    prompt = (await store.load_entries('other'))[0].message
    components, scales = np.zeros((1, 8), dtype=np.int8), np.ones(1, dtype=np.float32)
    await store.add_vectors(None, UNUSABLE, components, scales, [(content_hash(prompt), 'user')])
    assert await column_of(store, 'SELECT model FROM vector_space') == [UNUSABLE]
    assert await column_of(store, 'SELECT count(*) FROM document_vectors') == [1]


async def test_a_store_model_this_process_cannot_build_is_named_with_what_failed(any_store: Any):
    await _vectors_of_an_unusable_model(any_store)
    with pytest.raises(InvalidSearchParameters) as refused:
        await search_messages(any_store, QUESTION, conversation_id='other', scope=None, mode='semantic')
    message = str(refused.value)
    assert repr(UNUSABLE) in message and 'Unknown provider' in message
    for way in EVERY_WAY:
        assert way in message, way


EMBEDDED: list[int] = []


class _Counting(WordLlamaEmbeddingModel):
    """The local model, counting the texts it embeds."""

    async def embed(
        self, inputs: str | Sequence[str], *, input_type: EmbedInputType, settings: EmbeddingSettings | None = None
    ) -> EmbeddingResult:
        EMBEDDED.append(1 if isinstance(inputs, str) else len(inputs))
        return await super().embed(inputs, input_type=input_type, settings=settings)


async def _said(store: Any, conversation_id: str, *prompts: str) -> None:
    """pydantic-ai's own `save`, of a conversation with `prompts` added (no agent, no capability)."""
    conversation = await store.load(conversation_id) or Conversation(conversation_id=conversation_id)
    conversation.messages.extend(ModelRequest(parts=[UserPromptPart(prompt)]) for prompt in prompts)
    await store.save(conversation)


async def test_a_save_embeds_its_new_documents_once_and_nothing_else(any_store: Any):
    any_store.embedder = Embedder(_Counting())
    EMBEDDED.clear()
    await _said(any_store, 'saved', FACTS[0], FACTS[1])
    assert sum(EMBEDDED) == 2
    await _said(any_store, 'saved')  # a save with nothing new
    await _said(any_store, 'again', FACTS[0])  # a text the tenant already has a vector for
    assert sum(EMBEDDED) == 2
    assert await column_of(any_store, 'SELECT count(*) FROM document_vectors') == [2]
    found = await search_messages(any_store, QUESTION, conversation_id='saved', scope=None, mode='semantic')
    assert found.hits[0].excerpt == FACT


async def test_a_save_into_a_store_holding_vectors_embeds_with_their_model(any_store: Any):
    await tell(any_store, 'earlier', FACTS[:1], embedder=LOCAL_MODEL)  # the store records the local model
    await _said(any_store, 'saved', FACT)
    documents = await column_of(any_store, 'SELECT count(*) FROM documents')
    assert await column_of(any_store, 'SELECT count(*) FROM document_vectors') == documents
    found = await search_messages(any_store, QUESTION, conversation_id='saved', scope=None, mode='semantic')
    assert found.hits[0].excerpt == FACT


async def test_a_save_whose_store_model_cannot_be_built_is_saved_without_vectors(
    any_store: Any, caplog: pytest.LogCaptureFixture
):
    await _vectors_of_an_unusable_model(any_store)
    with caplog.at_level(logging.WARNING, logger='temporal_recall.embeddings'):
        await _said(any_store, 'saved', FACT)
    assert [entry.message.parts[0].content for entry in await any_store.load_entries('saved')] == [FACT]
    assert await column_of(any_store, 'SELECT count(*) FROM document_vectors') == [1]
    assert UNUSABLE in caplog.text and 'recall reindex --embeddings' in caplog.text
