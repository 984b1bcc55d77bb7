"""Faults under Temporal: an unreachable or locked store is retried visibly and recovers without loss;
a message too large for a Temporal payload fails fast with a clear, non-retryable error."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle

from temporal_recall import RunPromptInput, RunPromptWorkflow
from temporal_recall.store import open_store
from temporal_recall.testing import running_worker

from ._stored import assert_stored_once
from .agents import big_tool_agent, weather_agent

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


async def _wait_for_visible_retry(handle: WorkflowHandle, needle: str) -> str:
    """Until a pending activity has failed at least twice; returns its last failure message."""
    for _ in range(200):
        description = await handle.describe()
        for pending in description.raw_description.pending_activities:
            if pending.attempt >= 2 and needle in pending.last_failure.message:
                assert pending.state != PendingActivityState.PENDING_ACTIVITY_STATE_UNSPECIFIED
                return pending.last_failure.message
        await asyncio.sleep(0.2)
    raise AssertionError(f'no pending activity retried with a failure mentioning {needle!r}')


async def test_locked_store_is_retried_visibly_and_recovers(temporal_client: Client, tmp_path: Path):
    path = tmp_path / 'recall.db'
    store = await open_store(path)  # create the schema before locking the file
    await store.close()
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute('BEGIN EXCLUSIVE')
    try:
        async with running_worker(
            temporal_client, agents=[weather_agent], store=f'sqlite:///{path}?busy_timeout_ms=200'
        ) as worker:
            handle = await temporal_client.start_workflow(
                RunPromptWorkflow.run,
                RunPromptInput(prompt='Weather in Paris?', conversation_id='conv-locked', agent='weather'),
                id=f'locked-{uuid.uuid4()}',
                task_queue=worker.task_queue,
            )
            await _wait_for_visible_retry(handle, 'lock')
            blocker.execute('ROLLBACK')
            result = await asyncio.wait_for(handle.result(), timeout=120)
    finally:
        blocker.close()
    assert result.output == 'Sunny in Paris.'
    await assert_stored_once(path, 'conv-locked', 4)


async def test_a_message_too_large_for_a_payload_fails_fast_and_clearly(temporal_client: Client, store_url: str):
    async with running_worker(temporal_client, agents=[big_tool_agent], store=store_url) as worker:
        with pytest.raises(WorkflowFailureError) as failure:
            await asyncio.wait_for(
                temporal_client.execute_workflow(
                    RunPromptWorkflow.run,
                    RunPromptInput(prompt='a big report please', conversation_id='conv-big', agent='big_tool'),
                    id=f'big-{uuid.uuid4()}',
                    task_queue=worker.task_queue,
                ),
                timeout=60,
            )
    cause = failure.value.cause
    assert 'too large' in str(cause)
    assert getattr(cause, 'type', None) == 'PayloadTooLarge' or 'PayloadTooLarge' in str(cause)
