"""One place to name the embedding model (issue 50): a search by meaning with no embedder given uses the model the
store's vectors were made with, built by name, and where none can be had, the error names every way to configure
one; pydantic-ai's `save` writes vectors too. Real stores of both backends, the real offline model."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from pydantic_ai.conversation import Conversation
from pydantic_ai.embeddings import Embedder, EmbeddingResult, EmbeddingSettings
from pydantic_ai.embeddings.result import EmbedInputType
from pydantic_ai.messages import ModelRequest, UserPromptPart

from temporal_recall._exit_status import EXIT_USAGE
from temporal_recall.content import content_hash
from temporal_recall.embeddings import LOCAL_MODEL, WordLlamaEmbeddingModel
from temporal_recall.errors import InvalidSearchParameters
from temporal_recall.query import search_messages

from ..cli._support import recall_async
from ..store._support import column_of
from .test_hybrid import FACTS, tell

FACT = FACTS[1]
QUESTION = 'delivery address for that package'
"""Shares no word with `FACT`: only its meaning finds it."""

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
