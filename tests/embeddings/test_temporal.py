"""Recall by meaning through a real worker on a dev server: every interface finds a paraphrase, on both backends;
embedding costs no activity and no history event, and a replay never calls the embedder."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from temporal_recall import RunPromptInput, RunPromptWorkflow
from temporal_recall.api import create_app
from temporal_recall.embeddings import LOCAL_MODEL
from temporal_recall.store import open_store
from temporal_recall.testing import export_history, history_cost, replay, running_worker

from ..api._http import serving
from ..cli._support import recall_async
from ..store._support import column_of
from .agents import EMBEDDED, meaning_agent, words_agent
from .workflows import RecallByMeaningWorkflow, RecallInput

pytestmark = pytest.mark.temporal

FACT = 'The parcel was shipped to my office in Berlin.'
QUESTION = 'delivery address for that package'
"""Shares no word with `FACT`: only its meaning finds it."""
TOKEN = 'acme-token-0123456789abcdef'


async def _run(client: Client, queue: str, agent: str, prompt: str, conversation_id: str) -> tuple[str, str]:
    workflow_id = f'meaning-{uuid.uuid4()}'
    result = await client.execute_workflow(
        RunPromptWorkflow.run,
        RunPromptInput(prompt=prompt, conversation_id=conversation_id, agent=agent, scope='acme'),
        id=workflow_id,
        task_queue=queue,
    )
    return result.output, workflow_id


async def _recall(client: Client, queue: str, **given: object) -> list[tuple[str, list[str]]]:
    result = await client.execute_workflow(
        RecallByMeaningWorkflow.run,
        RecallInput(query=QUESTION, conversation_id='conv-meaning', scope='acme', **given),  # type: ignore[arg-type]
        id=f'recall-{uuid.uuid4()}',
        task_queue=queue,
    )
    return [(hit.excerpt, hit.found_by) for hit in result.hits]


async def test_every_interface_finds_a_paraphrase_through_a_worker(temporal_client: Client, any_store_url: str):
    async with running_worker(
        temporal_client,
        agents=[words_agent],
        store=any_store_url,
        workflows=[RecallByMeaningWorkflow],
        embedder=LOCAL_MODEL,
    ) as worker:
        queue = worker.task_queue
        for fact in (FACT, 'My order number is ZEBRA-93, the blue kettle.', 'We hike in Norway in August.'):
            await _run(temporal_client, queue, 'words', fact, 'conv-meaning')

        # Workflow code: the query is embedded in the search activity (hybrid: the worker has an embedder).
        assert (await _recall(temporal_client, queue))[0] == (FACT, ['semantic'])
        assert FACT not in [excerpt for excerpt, _ in await _recall(temporal_client, queue, mode='bm25')]

        # `recall search` and the HTTP API, with the same model.
        searched = await recall_async(
            *('search', 'conv-meaning', *QUESTION.split(), '--scope', 'acme', '--role', 'user'),
            *('--format', 'json', '--store', any_store_url),
            env={'TEMPORAL_RECALL_EMBEDDER': LOCAL_MODEL},
        )
        assert searched.returncode == 0, searched.stderr
        assert searched.json()['hits'][0]['excerpt'] == FACT
        with serving(create_app(any_store_url, tokens={TOKEN: 'acme'}, embedder=LOCAL_MODEL)) as api:
            body = {'conversation_id': 'conv-meaning', 'query': QUESTION, 'role': 'user', 'mode': 'semantic'}
            answered = api.request('POST', '/api/v1/conversations/search', token=TOKEN, json_body=body)
        assert answered.status == 200 and answered.json()['hits'][0]['excerpt'] == FACT

        # The model's tool, in a later run of the conversation.
        output, _ = await _run(temporal_client, queue, 'words', f'recall {QUESTION}', 'conv-meaning')
        assert FACT in output


async def test_embedding_costs_nothing_in_history_and_a_replay_never_embeds(temporal_client: Client, tmp_path: Path):
    store_url = str(tmp_path / 'recall.db')
    histories: dict[str, list[str]] = {}
    async with running_worker(temporal_client, agents=[meaning_agent, words_agent], store=store_url) as worker:
        EMBEDDED.clear()
        for agent in ('meaning', 'words'):  # the same script: one with an embedder, one without
            histories[agent] = []
            for prompt in ('Weather in Paris?', 'recall Paris'):  # the second: model, tool, model
                _, workflow_id = await _run(temporal_client, worker.task_queue, agent, prompt, f'conv-{agent}')
                histories[agent].append(await export_history(temporal_client, workflow_id))
    assert sum(EMBEDDED) >= 5  # two prompts, two answers, the tool's return (and the tool's query)
    for with_embedder, without in zip(histories['meaning'], histories['words'], strict=True):
        costs = history_cost(with_embedder), history_cost(without)
        assert costs[0].activity_count == costs[1].activity_count
        assert costs[0].events == costs[1].events
    store = await open_store(store_url)
    try:
        documents = await column_of(
            store,
            'SELECT count(*) FROM documents d JOIN tenants t ON t.tenant_id = d.tenant_id '
            'JOIN conversation_documents m ON m.doc_id = d.doc_id JOIN conversations c ON c.conv_key = m.conv_key '
            "WHERE c.conversation_id = 'conv-meaning'",
        )
        assert await column_of(store, 'SELECT count(*) FROM document_vectors') == documents
    finally:
        await store.close()
    EMBEDDED.clear()
    await replay(histories['meaning'], agents=[meaning_agent, words_agent])
    assert EMBEDDED == []
