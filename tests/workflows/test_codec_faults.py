"""RecallDataCodec when its store is unreachable: workflow tasks fail visibly, retry, and recover.

Encoding runs when a workflow task completes (activity inputs) and when an activity completes (its
result); decoding when a worker receives a workflow activation or an activity task. Either way an
unreachable store must stop progress loudly, never drop or replace a payload, and resume once the
store is back.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.client import WorkflowHandle

from temporal_recall import (
    RunPromptInput,
    RunPromptWorkflow,
    message_codec_plugin,
)
from temporal_recall.testing import DevServer, connect, running_worker

from ._stored import assert_stored_once
from .agents import weather_agent

pytestmark = [pytest.mark.temporal, pytest.mark.slow]

RETRY_AFTER = timedelta(seconds=2)
"""The workflow task timeout: after the first failure, a workflow task is retried when the last attempt
timed out (10 s by default), so recovery is seen within seconds."""


async def _failed_workflow_tasks(handle: WorkflowHandle) -> list[str]:
    history = await handle.fetch_history()
    return [
        event.workflow_task_failed_event_attributes.failure.message
        for event in history.events
        if event.HasField('workflow_task_failed_event_attributes')
    ]


async def _wait_for_failed_workflow_task(handle: WorkflowHandle) -> list[str]:
    for _ in range(300):
        failures = await _failed_workflow_tasks(handle)
        if failures:
            return failures
        await asyncio.sleep(0.1)
    raise AssertionError('no workflow task failed although the codec store is unreachable')


async def test_an_unreachable_store_while_encoding_fails_the_task_and_recovers(
    temporal_dev_server: DevServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    bodies = tmp_path / 'bodies-not-yet'  # the codec's store is unreachable until this exists
    plugin = message_codec_plugin(str(bodies / 'bodies.db'))
    store_path = tmp_path / 'recall.db'
    try:
        client = await connect(temporal_dev_server, plugins=[plugin])
        async with running_worker(client, agents=[weather_agent], store=str(store_path)) as worker:
            handle = await client.start_workflow(
                RunPromptWorkflow.run,
                RunPromptInput(prompt='Weather in Paris?', conversation_id='codec-encode-outage', agent='weather'),
                id=f'codec-encode-{uuid.uuid4()}',
                task_queue=worker.task_queue,
                task_timeout=RETRY_AFTER,
            )
            with caplog.at_level(logging.ERROR, logger='temporalio'):
                failures = await _wait_for_failed_workflow_task(handle)
            # The first workflow task schedules the model request, whose input must be encoded.
            assert any('Failed encoding' in failure and 'does not exist' in failure for failure in failures)
            assert any(str(bodies) in record.getMessage() + str(record.exc_info) for record in caplog.records)
            bodies.mkdir()  # the outage ends; the next attempt of the workflow task encodes
            result = await asyncio.wait_for(handle.result(), timeout=120)
    finally:
        await plugin.codec.aclose()
    assert result.output == 'Sunny in Paris.'
    await assert_stored_once(store_path, 'codec-encode-outage', 4)


async def test_an_unreachable_store_while_decoding_fails_the_task_and_recovers(
    temporal_dev_server: DevServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    bodies = tmp_path / 'bodies'
    moved = tmp_path / 'bodies-away'
    store_path = tmp_path / 'recall.db'
    task_queue = f'codec-decode-{uuid.uuid4()}'
    bodies.mkdir()
    # A prompt above the codec's threshold: the client stores the workflow input as bodies, and the
    # worker's first workflow task must fetch them before it can run any workflow code.
    prompt = 'Weather in Paris? ' + 'I am planning a long walk along the river and need the details. ' * 12

    client_side = message_codec_plugin(str(bodies / 'bodies.db'))
    worker_side = message_codec_plugin(str(bodies / 'bodies.db'))  # its own, empty cache
    try:
        client = await connect(temporal_dev_server, plugins=[client_side])
        handle = await client.start_workflow(
            RunPromptWorkflow.run,
            RunPromptInput(prompt=prompt, conversation_id='codec-decode-outage', agent='weather'),
            id=f'codec-decode-{uuid.uuid4()}',
            task_queue=task_queue,
            task_timeout=RETRY_AFTER,
        )
        bodies.rename(moved)  # the store goes away before any worker has seen the workflow
        worker_client = await connect(temporal_dev_server, plugins=[worker_side])
        async with running_worker(worker_client, agents=[weather_agent], store=str(store_path), task_queue=task_queue):
            with caplog.at_level(logging.ERROR, logger='temporalio'):
                failures = await _wait_for_failed_workflow_task(handle)
            assert any('does not exist' in failure and str(bodies) in failure for failure in failures)
            assert all('encoding' not in failure for failure in failures)  # it failed while decoding
            assert any(str(bodies) in record.getMessage() + str(record.exc_info) for record in caplog.records)
            moved.rename(bodies)  # the outage ends
            result = await asyncio.wait_for(handle.result(), timeout=120)
    finally:
        await client_side.codec.aclose()
        await worker_side.codec.aclose()
    assert result.output == 'Sunny in Paris.'
    await assert_stored_once(store_path, 'codec-decode-outage', 4)
