"""The agent registry the shipped workflows read: per task queue, replaced per replay, never leaked."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import TemporalDurability
from pydantic_ai.models.test import TestModel
from temporalio.client import Client
from temporalio.worker import Worker

from temporal_recall import RecallDeps, RecallPlugin
from temporal_recall.workflows._agents import _AGENTS, agent_named, register_agents, unregister_agents


def _agent(name: str) -> Agent[None, str]:
    return Agent(TestModel(), name=name)


def test_a_replays_agents_replace_the_last_replays_default_included() -> None:
    first, second = _agent('first'), _agent('second')
    register_agents([first], task_queue=None)
    register_agents([second], task_queue=None)
    assert agent_named(None) is second, 'outside a workflow, the replay registry answers; the last is the default'
    assert agent_named('first') is first, "another plugin's agents stay"
    register_agents([], task_queue=None)
    assert agent_named(None) is second


def test_a_queue_is_forgotten_when_its_last_worker_stops() -> None:
    queue = f'q-{uuid.uuid4()}'
    agent = _agent('kept')
    register_agents([agent], task_queue=queue)
    register_agents([agent], task_queue=queue)
    with pytest.raises(ValueError, match='workers of one task queue must run the same agents'):
        register_agents([_agent('kept')], task_queue=queue)
    unregister_agents(task_queue=queue)
    assert queue in _AGENTS
    unregister_agents(task_queue=queue)
    assert queue not in _AGENTS


@pytest.mark.temporal
async def test_a_worker_built_but_never_run_registers_nothing(temporal_client: Client, tmp_path: Path) -> None:
    queue = f'never-run-{uuid.uuid4()}'

    def durable() -> Agent[RecallDeps, str]:  # a fresh one each time, as a test suite builds them
        return Agent(TestModel(), name='support', deps_type=RecallDeps, capabilities=[TemporalDurability()])

    Worker(temporal_client, task_queue=queue, plugins=[RecallPlugin(tmp_path / 'r.db', agents=[durable()])])
    assert queue not in _AGENTS
    other = f'runs-{uuid.uuid4()}'
    plugin = RecallPlugin(tmp_path / 'r.db', agents=[durable()])
    async with Worker(temporal_client, task_queue=other, plugins=[plugin]):
        for _ in range(100):  # `async with` starts the run in a task: registered before it polls
            if other in _AGENTS:
                break
            await asyncio.sleep(0.05)
        assert other in _AGENTS, 'registered while it runs'
    assert other not in _AGENTS
    assert queue not in _AGENTS
