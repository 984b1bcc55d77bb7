"""Recorded histories replay against today's code, touching neither the store nor a model.

Re-record with `.venv/bin/python -m tests.replay.record_histories` after a deliberate change.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.workflow import NondeterminismError

from temporal_recall.testing import replay

from ..workflows import agents
from .conftest import store_plugin
from .workflows import ChangedRunPromptWorkflow, RecallDirectlyWorkflow

HISTORIES = sorted((Path(__file__).parent / 'histories').glob('*.json'))
AGENTS = [agents.weather_agent, agents.recall_agent, agents.slow_tool_agent]


def test_every_scenario_has_a_recorded_history():
    names = {path.stem for path in HISTORIES}
    assert {
        'one_prompt_with_tool',
        'model_calls_recall_tool',
        'workflow_calls_recall',
        'conversation_run_1',
        'conversation_run_2',
        'worker_killed_mid_run',
    } <= names


@pytest.mark.parametrize('path', HISTORIES, ids=[path.stem for path in HISTORIES])
async def test_recorded_history_replays_without_store_or_model(path: Path, forbidden_store):
    model_calls_before = len(agents.MODEL_CALLS)
    results = await replay(
        [path.read_text()],
        workflows=[RecallDirectlyWorkflow],
        agents=AGENTS,
        plugins=[store_plugin(forbidden_store)],
    )
    assert all(result.replay_failure is None for result in results.replay_failures.values())
    assert forbidden_store.calls == []
    assert len(agents.MODEL_CALLS) == model_calls_before


async def test_a_changed_workflow_fails_replay_with_nondeterminism(forbidden_store):
    history = (Path(__file__).parent / 'histories' / 'one_prompt_with_tool.json').read_text()
    with pytest.raises(NondeterminismError):
        await replay([history], workflows=[ChangedRunPromptWorkflow], agents=AGENTS, include_shipped_workflows=False)
