"""The demo's searches, on its conversation held by a plain `agent.run` (no Temporal): the scripted demo model,
a real SQLite store and the real local embedding model, as `recall demo` runs them with the `semantic` extra."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage

from temporal_recall import ConversationRecall
from temporal_recall.demo import lookup_order, scripted_model
from temporal_recall.demo._run import DEMO_TURNS, MEANING_QUERY
from temporal_recall.embeddings import LOCAL_MODEL
from temporal_recall.query import search_messages
from temporal_recall.store import open_store

PREFERENCE = 'Thanks. Can you also note that I prefer deliveries after 5pm?'


async def _converse(store: Any, prompts: tuple[str, ...]) -> str:
    """The prompts as one conversation of the demo agent, each turn its own run; the last turn's answer."""
    agent = Agent(
        scripted_model(), tools=[lookup_order], capabilities=[ConversationRecall(store=store, embedder=LOCAL_MODEL)]
    )
    history: list[ModelMessage] = []
    output = ''
    for prompt in prompts:
        result = await agent.run(prompt, conversation_id='support', message_history=history)
        history, output = result.all_messages(), result.output
    return output


async def test_the_demos_invoice_search_returns_only_the_messages_holding_its_words(tmp_path: Path) -> None:
    store = await open_store(tmp_path / 'recall.db')
    try:
        await _converse(store, DEMO_TURNS)
        search = {'conversation_id': 'support', 'scope': None, 'embedder': LOCAL_MODEL}
        found = await search_messages(store, 'invoice INV-7731', **search)  # as the demo's search Update asks

        assert found.mode == 'hybrid'
        assert [(hit.position, hit.role) for hit in found.hits] == [(8, 'user'), (9, 'assistant')]
        assert all('invoice INV-7731' in hit.excerpt for hit in found.hits)
        assert all(hit.found_by == ['bm25', 'semantic'] for hit in found.hits)
        nearest = await search_messages(store, 'invoice INV-7731', mode='semantic', **search)
        assert len(nearest.hits) == 10  # by meaning alone, the nearest messages, however far

        meaning = await search_messages(store, MEANING_QUERY, role='user', limit=3, **search)
        assert meaning.hits[0].excerpt == PREFERENCE and meaning.hits[0].found_by == ['semantic']
    finally:
        await store.close()


async def test_the_models_tool_keeps_a_paraphrase_when_its_own_prompt_is_nearer(tmp_path: Path) -> None:
    """The tool leaves its own run out, and so out of the floor's reference: its prompt, in the query's words,
    is far nearer the query (cosine 0.75) than the preference it finds by meaning alone (0.17)."""
    store = await open_store(tmp_path / 'recall.db')
    try:
        answer = await _converse(store, (*DEMO_TURNS, 'Remind me when should the courier come?'))
    finally:
        await store.close()

    assert answer == f'You told me earlier: "{PREFERENCE}"'
