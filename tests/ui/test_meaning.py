"""Behind a chat UI with an embedder: each turn the adapter saves is found by meaning, with no `recall reindex`.

Through pydantic-ai's Vercel AI and AG-UI adapters with `conversation_store=`, on both backends, with the real
offline model: a store opened with `open_store(..., embedder=...)` embeds what the adapter's `save` writes (the
agent carrying `ConversationRecall` or not), and a store already holding vectors embeds it with their model.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import Agent

from temporal_recall import ConversationRecall, RecallDeps
from temporal_recall.embeddings import LOCAL_MODEL
from temporal_recall.query import search_messages
from temporal_recall.store import open_store

from ..embeddings.test_hybrid import FACTS, tell
from ..store._support import column_of
from ._chat import CLIENTS, asgi_client, chat_app
from .agents import chat_model, lookup_order

PROTOCOLS = sorted(CLIENTS)
FACT = FACTS[1]
QUESTION = 'delivery address for that package'
"""Shares no word with `FACT`: only its meaning finds it."""


def _agent(store: Any, *, recall: bool) -> Agent[RecallDeps, str]:
    """The chat agent: with `ConversationRecall(store=store)` (no embedder of its own), or the adapter's save alone."""
    return Agent(
        chat_model(),
        deps_type=RecallDeps,
        tools=[lookup_order],
        capabilities=[ConversationRecall(store=store)] if recall else [],
    )


async def _chat(store: Any, agent: Agent[RecallDeps, str], protocol: str, chat_id: str) -> None:
    async with asgi_client(chat_app(agent, store)) as http:
        chat = CLIENTS[protocol](http, chat_id, 'acme')
        for fact in FACTS:
            turn = await chat.send(fact)
            assert (turn.status, turn.error) == (200, None), fact


async def _found_by_meaning(store: Any, chat_id: str) -> None:
    """Every document of the store has its vector, and `QUESTION` finds `FACT` with no embedder given."""
    documents = await column_of(store, 'SELECT count(*) FROM documents')
    assert documents != [0] and await column_of(store, 'SELECT count(*) FROM document_vectors') == documents
    found = await search_messages(store, QUESTION, conversation_id=chat_id, scope='acme', role='user', mode='semantic')
    assert found.hits[0].excerpt == FACT


@pytest.mark.parametrize('recall', [False, True], ids=['adapter-alone', 'with-recall'])
@pytest.mark.parametrize('protocol', PROTOCOLS)
async def test_a_chat_turn_saved_with_the_stores_embedder_is_found_by_meaning(
    any_store_url: str, protocol: str, recall: bool
):
    store = await open_store(any_store_url, embedder=LOCAL_MODEL)
    try:
        await _chat(store, _agent(store, recall=recall), protocol, f'chat-{protocol}')
        await _found_by_meaning(store, f'chat-{protocol}')
    finally:
        await store.close()


@pytest.mark.parametrize('protocol', PROTOCOLS)
async def test_a_chat_turn_saved_into_a_store_holding_vectors_is_embedded_with_their_model(
    any_store: Any, protocol: str
):
    await tell(any_store, 'earlier', ['I like green tea in the morning.'], scope='acme', embedder=LOCAL_MODEL)
    await _chat(any_store, _agent(any_store, recall=False), protocol, f'chat-{protocol}')
    await _found_by_meaning(any_store, f'chat-{protocol}')
