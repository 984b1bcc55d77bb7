"""Recovery after a worker dies (issue 50): what every activity of the shipped agent and workflows is scheduled with.

A killed worker's activity is retried elsewhere once a timeout says its worker is gone, so every activity the
demo agent, `ConversationWorkflow`, `recall()` and `load_history()` schedule carries a heartbeat timeout of
10 s, and heartbeats (pydantic-ai's activities, and the search and history ones here). The wait itself is
measured by `scripts/bench_fleet.py --faults`, never asserted as a time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from datetime import timedelta

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from temporal_recall import ConversationInput, ConversationWorkflow, SearchRequest, TurnInput
from temporal_recall.activities._recall_activities import heartbeating
from temporal_recall.demo import agent as demo_agent
from temporal_recall.testing import running_worker

from ..replay.workflows import RecallDirectlyWorkflow


@pytest.mark.temporal
async def test_every_activity_of_the_demo_and_the_workflows_notices_a_dead_worker_within_10_s(
    temporal_client: Client, store_url: str
) -> None:
    conversation_id = f'recovery-{uuid.uuid4().hex[:8]}'
    async with running_worker(
        temporal_client, agents=[demo_agent], store=store_url, workflows=[RecallDirectlyWorkflow]
    ) as worker:
        handle = await temporal_client.start_workflow(
            ConversationWorkflow.run,
            ConversationInput(conversation_id=conversation_id, agent=demo_agent.name),
            id=conversation_id,
            task_queue=worker.task_queue,
        )
        await handle.execute_update(ConversationWorkflow.send, TurnInput(prompt='Where is order A-1042?'))
        recalled = await handle.execute_update(
            ConversationWorkflow.send, TurnInput(prompt='What did I say earlier about order A-1042?')
        )
        assert 'You told me earlier' in recalled.output
        await handle.execute_update(ConversationWorkflow.search, SearchRequest(query='A-1042'))
        await handle.signal(ConversationWorkflow.close)
        await handle.result()
        direct = temporal_client.get_workflow_handle(f'direct-{uuid.uuid4()}')
        direct = await temporal_client.start_workflow(
            RecallDirectlyWorkflow.run, conversation_id, id=direct.id, task_queue=worker.task_queue
        )
        await direct.result()

    scheduled: dict[str, tuple[timedelta, timedelta]] = {}
    for workflow in (handle, direct):
        async for event in workflow.fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                attributes = event.activity_task_scheduled_event_attributes
                scheduled[attributes.activity_type.name] = (
                    attributes.heartbeat_timeout.ToTimedelta(),
                    attributes.start_to_close_timeout.ToTimedelta(),
                )
    recall_tool = f'agent__{demo_agent.name}__toolset__recall-search__call_tool'
    assert {
        'temporal_recall.load_history',
        'temporal_recall.search',
        f'agent__{demo_agent.name}__model_request',
        f'agent__{demo_agent.name}__toolset__<agent>__call_tool',
        recall_tool,
    } <= set(scheduled), sorted(scheduled)
    assert {name: heartbeat for name, (heartbeat, _) in scheduled.items()} == dict.fromkeys(
        scheduled, timedelta(seconds=10)
    )
    # Short store calls keep a bound of their own; a model request and the demo's own tool get the agent's.
    assert scheduled['temporal_recall.search'][1] == scheduled['temporal_recall.load_history'][1]
    assert scheduled[recall_tool][1] == timedelta(seconds=30)
    assert scheduled[f'agent__{demo_agent.name}__model_request'][1] == timedelta(seconds=60)


async def test_heartbeating_beats_while_the_block_awaits_and_not_at_all_for_a_short_call() -> None:
    beats: list[tuple[object, ...]] = []
    three = asyncio.Event()

    def beat(*details: object) -> None:
        beats.append(details)
        if len(beats) == 3:
            three.set()

    environment = ActivityEnvironment()
    environment.info = dataclasses.replace(environment.info, heartbeat_timeout=timedelta(milliseconds=100))
    environment.on_heartbeat = beat

    async def short() -> None:
        async with heartbeating():
            pass

    async def long() -> None:
        async with heartbeating():
            await three.wait()  # awaits, as a store call does: the beats (every 50 ms) run meanwhile

    await environment.run(short)
    assert beats == []  # the first beat comes half a timeout in: a short call costs the server nothing
    await environment.run(long)
    assert len(beats) == 3


async def test_heartbeating_reports_the_block_s_own_error() -> None:
    environment = ActivityEnvironment()

    async def failing() -> None:
        async with heartbeating():
            raise ValueError('the store said no')

    with pytest.raises(ValueError, match='the store said no'):
        await environment.run(failing)
