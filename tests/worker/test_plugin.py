"""`RecallPlugin` on real workers: each worker writes to its own store, the plugin works on the client
as on the worker, beside the message codec, and it owns the store's lifetime."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import AgentPlugin, TemporalDurability
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from temporal_recall import (
    ConversationRecall,
    RecallDeps,
    RecallPlugin,
    RunPromptInput,
    RunPromptWorkflow,
    message_codec_plugin,
)
from temporal_recall._devserver import free_port
from temporal_recall.errors import ConfigurationError, NotADatabase, StoreUnavailable
from temporal_recall.store import open_store
from temporal_recall.testing import DevServer, connect, scripted_model, text

from ..workflows.agents import echo_agent, weather_agent
from .workflows import WeatherWithoutPlugin

pytestmark = pytest.mark.temporal


async def _run(client: Client, queue: str, conversation_id: str) -> str:
    result = await client.execute_workflow(
        RunPromptWorkflow.run,
        RunPromptInput(prompt=f'Weather for {conversation_id}?', conversation_id=conversation_id, agent='weather'),
        id=f'plugin-{uuid.uuid4()}',
        task_queue=queue,
        execution_timeout=timedelta(seconds=30),  # a store-less activity would retry until then
    )
    return result.output


async def _conversations(path: Path) -> set[str]:
    store = await open_store(path)
    try:
        return {record.conversation_id for record in await store.list_conversations()}
    finally:
        await store.close()


async def test_two_workers_in_one_process_each_write_to_their_own_store(temporal_client: Client, tmp_path: Path):
    first, second = tmp_path / 'first.db', tmp_path / 'second.db'
    queue_a, queue_b = f'a-{uuid.uuid4()}', f'b-{uuid.uuid4()}'
    # The same module-level agent (and so the same capability object) on both workers.
    worker_a = Worker(temporal_client, task_queue=queue_a, plugins=[RecallPlugin(first, agents=[weather_agent])])
    worker_b = Worker(temporal_client, task_queue=queue_b, plugins=[RecallPlugin(second, agents=[weather_agent])])
    async with worker_a, worker_b:
        await _run(temporal_client, queue_a, 'on-a')
        await _run(temporal_client, queue_b, 'on-b')
        await _run(temporal_client, queue_a, 'also-on-a')
    assert await _conversations(first) == {'on-a', 'also-on-a'}
    assert await _conversations(second) == {'on-b'}


async def test_each_worker_runs_its_own_agents_and_the_first_is_its_default(temporal_client: Client, tmp_path: Path):
    """Agents are registered per task queue: two workers of one process never run each other's."""

    async def default_output(queue: str) -> str:
        result = await client_run(queue, RunPromptInput(prompt='hi', conversation_id=f'c-{uuid.uuid4()}'))
        return result.output

    async def client_run(queue: str, given: RunPromptInput):
        return await temporal_client.execute_workflow(
            RunPromptWorkflow.run,
            given,
            id=f'plugin-{uuid.uuid4()}',
            task_queue=queue,
            execution_timeout=timedelta(seconds=30),
        )

    queue_a, queue_b = f'a-{uuid.uuid4()}', f'b-{uuid.uuid4()}'
    worker_a = Worker(
        temporal_client, task_queue=queue_a, plugins=[RecallPlugin(tmp_path / 'a.db', agents=[echo_agent])]
    )
    async with worker_a:
        assert await default_output(queue_a) == 'repeat this exactly'
    worker_b = Worker(
        temporal_client, task_queue=queue_b, plugins=[RecallPlugin(tmp_path / 'b.db', agents=[weather_agent])]
    )
    worker_c = Worker(
        temporal_client, task_queue=queue_a, plugins=[RecallPlugin(tmp_path / 'c.db', agents=[echo_agent])]
    )
    async with worker_b, worker_c:
        assert await default_output(queue_b) == 'Sunny in Paris.', 'not the first agent another worker registered'
        assert await default_output(queue_a) == 'repeat this exactly'
        with pytest.raises(WorkflowFailureError) as failure:
            await client_run(queue_b, RunPromptInput(prompt='hi', conversation_id='c-echo', agent='echo'))
    assert "No agent named 'echo'" in str(failure.value.cause), 'the other worker has it; this one does not'


async def test_agents_of_one_name_on_workers_one_after_the_other(temporal_client: Client, tmp_path: Path):
    for attempt in range(2):  # a fresh agent per test, as a suite builds them
        agent = Agent(
            scripted_model(text(f'answer {attempt}')),
            name='support',
            deps_type=RecallDeps,
            capabilities=[ConversationRecall(), TemporalDurability()],
        )
        queue = f'same-{uuid.uuid4()}'
        async with Worker(temporal_client, task_queue=queue, plugins=[RecallPlugin(tmp_path / 's.db', agents=[agent])]):
            result = await temporal_client.execute_workflow(
                RunPromptWorkflow.run,
                RunPromptInput(prompt='hi', conversation_id=f'same-{attempt}'),
                id=f'plugin-{uuid.uuid4()}',
                task_queue=queue,
                execution_timeout=timedelta(seconds=30),
            )
        assert result.output == f'answer {attempt}'


async def test_plugin_on_the_client_serves_every_worker_built_from_it(temporal_dev_server: DevServer, tmp_path: Path):
    path = tmp_path / 'client.db'
    client = await connect(temporal_dev_server, plugins=[RecallPlugin(path, agents=[weather_agent])])
    queue = f'client-{uuid.uuid4()}'
    async with Worker(client, task_queue=queue):
        assert 'Paris' in await _run(client, queue, 'from-client-plugin')
    assert await _conversations(path) == {'from-client-plugin'}


async def test_plugin_works_beside_the_message_codec(temporal_dev_server: DevServer, tmp_path: Path):
    path = tmp_path / 'codec.db'
    codec = message_codec_plugin(str(path))
    client = await connect(temporal_dev_server, plugins=[codec, RecallPlugin(path, agents=[weather_agent])])
    queue = f'codec-{uuid.uuid4()}'
    try:
        async with Worker(client, task_queue=queue):
            await _run(client, queue, 'with-codec')
    finally:
        await codec.codec.aclose()
    assert await _conversations(path) == {'with-codec'}
    with sqlite3.connect(path) as db:
        (bodies,) = db.execute('SELECT count(*) FROM message_bodies').fetchone()
    assert bodies > 0, 'the codec stored message bodies in the same store'


async def test_the_store_is_open_while_the_worker_runs_and_closed_after(temporal_client: Client, tmp_path: Path):
    path = tmp_path / 'lifetime.db'
    wal = path.with_name(path.name + '-wal')
    queue = f'life-{uuid.uuid4()}'
    async with Worker(temporal_client, task_queue=queue, plugins=[RecallPlugin(path, agents=[weather_agent])]):
        await _run(temporal_client, queue, 'lifetime')
        assert wal.exists(), 'the plugin holds the store open while the worker runs'
    # SQLite removes the write-ahead log when its last connection closes.
    assert not wal.exists(), 'the plugin closed the store when the worker stopped'


async def test_a_store_that_cannot_open_stops_the_worker_before_it_polls(temporal_client: Client, tmp_path: Path):
    not_a_store = tmp_path / 'notes.txt'
    not_a_store.write_text('not a database\n' * 100)
    worker = Worker(
        temporal_client, task_queue=f'bad-{uuid.uuid4()}', plugins=[RecallPlugin(not_a_store, agents=[weather_agent])]
    )
    with pytest.raises(Exception, match=r'notes\.txt'):
        await worker.run()
    assert not worker.is_running


async def test_a_store_in_a_missing_folder_stops_the_worker_before_it_polls(temporal_client: Client, tmp_path: Path):
    """A missing folder is a wrong setting, not an outage: no "activities will retry", no polling."""
    missing = tmp_path / 'no' / 'such' / 'dir'
    worker = Worker(
        temporal_client, task_queue=f'bad-{uuid.uuid4()}', plugins=[RecallPlugin(missing / 'x.db', agents=[echo_agent])]
    )
    with pytest.raises(NotADatabase, match=f'the directory {missing} does not exist'):
        async with asyncio.timeout(60):  # before the fix it polled on; fail rather than hang
            await worker.run()
    assert not worker.is_running
    assert not missing.parent.exists()


async def test_an_unreachable_store_at_start_stops_the_worker_naming_host_and_port(temporal_client: Client):
    """A wrong port is a setting to fix, not an outage: before the fix the worker logged "activities
    will retry", polled on, and its workflows stalled for ever."""
    port = free_port()  # nothing listens there
    plugin = RecallPlugin(
        f'postgresql://recall:secret@127.0.0.1:{port}/recall?connect_timeout_ms=2000', agents=[echo_agent]
    )
    worker = Worker(temporal_client, task_queue=f'bad-{uuid.uuid4()}', plugins=[plugin])
    with pytest.raises(StoreUnavailable) as refused:
        async with asyncio.timeout(60):  # before the fix it polled on; fail rather than hang
            await worker.run()
    assert not worker.is_running
    message = str(refused.value)
    assert f'127.0.0.1:{port}' in message and 'host and port in the store URL' in message, message
    assert '\n' not in message and 'secret' not in message
    assert refused.value.__cause__ is None and refused.value.__suppress_context__, "no driver's traceback chained"


async def test_a_plugin_without_agents_warns_at_worker_start_naming_agents(
    temporal_client: Client, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    queue = f'no-agents-{uuid.uuid4()}'
    with caplog.at_level(logging.WARNING, logger='temporal_recall.worker'):
        async with Worker(temporal_client, task_queue=queue, plugins=[RecallPlugin(tmp_path / 'a.db', agents=[])]):
            pass
        async with Worker(
            temporal_client, task_queue=f'{queue}-2', plugins=[RecallPlugin(tmp_path / 'b.db', agents=[echo_agent])]
        ):
            pass
    warned = [r.getMessage() for r in caplog.records if r.name == 'temporal_recall.worker']
    assert len(warned) == 1, warned
    assert 'has no agents' in warned[0] and 'agents=[...]' in warned[0] and repr(queue) in warned[0]


async def test_a_capability_without_a_store_fails_its_activity_once(temporal_client: Client):
    """On a worker without `RecallPlugin`, the model-request activity has no store: that is not retried."""
    queue = f'no-plugin-{uuid.uuid4()}'
    handle = None
    async with Worker(
        temporal_client, task_queue=queue, workflows=[WeatherWithoutPlugin], plugins=[AgentPlugin(weather_agent)]
    ):
        handle = await temporal_client.start_workflow(
            WeatherWithoutPlugin.run,
            'no-plugin-1',
            id=f'no-plugin-{uuid.uuid4()}',
            task_queue=queue,
            execution_timeout=timedelta(seconds=60),  # before the fix it retried forever; fail rather than hang
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
    cause = failed.value.cause
    while not isinstance(cause, ApplicationError) and cause is not None and cause.cause is not None:
        cause = cause.cause
    assert isinstance(cause, ApplicationError), failed.value
    assert cause.type == 'ConfigurationError' and cause.non_retryable
    assert 'RecallPlugin' in cause.message
    history = await handle.fetch_history()
    attempts = [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.HasField('activity_task_started_event_attributes')
    ]
    assert attempts == [1], 'failed once, not retried'


async def test_a_client_without_the_pydantic_ai_plugin_is_refused(temporal_dev_server: DevServer, tmp_path: Path):
    bare = await Client.connect(temporal_dev_server.address)
    with pytest.raises(ConfigurationError, match='PydanticAIPlugin'):
        Worker(bare, task_queue='never', plugins=[RecallPlugin(tmp_path / 'x.db', agents=[weather_agent])])
