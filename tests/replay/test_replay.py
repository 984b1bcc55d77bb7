"""Recorded histories replay against today's code, touching neither the store nor a model.

Record into a new folder with `.venv/bin/python -m tests.replay.record_histories` after a deliberate
change; no folder is ever re-recorded (record_histories.py lists what each holds: before in-activity
persistence, in-activity under pydantic-ai 2.68, the same code under 2.78, and form-2 markers).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.workflow import NondeterminismError

from temporal_recall.testing import history_cost, replay

from ..workflows import agents
from .conftest import store_plugin
from .workflows import ChangedRunPromptWorkflow, RecallDirectlyWorkflow

FOLDER = Path(__file__).parent / 'histories'
HISTORIES = sorted(FOLDER.rglob('*.json'))
AGENTS = [
    agents.weather_agent,
    agents.recall_agent,
    agents.slow_tool_agent,
    agents.output_tool_agent,
    agents.streaming_agent,
    agents.flaky_agent,
]
SCENARIOS = {
    'one_prompt_with_tool',
    'model_calls_recall_tool',
    'workflow_calls_recall',
    'conversation_run_1',
    'conversation_run_2',
    'worker_killed_mid_run',
}


IN_ACTIVITY = ('in_activity', 'pydantic_ai_2_78', 'canonical_form_2', 'reload_after_failed_turn')
"""The folders recorded with in-activity persistence: under pydantic-ai 2.68, by the same code under 2.78,
with form-2 markers (tool calls stamped in the activity) under 2.78, and with a failed conversation turn
reloading the stored conversation (a patch marker)."""


def test_every_scenario_has_a_recorded_history_from_every_era():
    assert {path.stem for path in FOLDER.glob('*.json')} >= SCENARIOS
    for folder in IN_ACTIVITY:
        recorded = {path.stem for path in (FOLDER / folder).glob('*.json')}
        assert SCENARIOS | {'output_tool', 'streaming_with_tools', 'error_after_tool_calls'} <= recorded, folder


def _store_steps(path: Path) -> int:
    return history_cost(path.read_text()).activities_matching('__store_step')


def test_the_old_histories_wrote_through_store_step_and_the_new_ones_only_where_no_activity_saw():
    assert _store_steps(FOLDER / 'one_prompt_with_tool.json') == 3
    for folder in IN_ACTIVITY:
        assert _store_steps(FOLDER / folder / 'one_prompt_with_tool.json') == 0
        assert _store_steps(FOLDER / folder / 'streaming_with_tools.json') == 0
        assert _store_steps(FOLDER / folder / 'error_after_tool_calls.json') == 1
    # An output tool's return is written by one store_step; under 2.78, code that did not stamp the tool
    # call in the activity wrote the response again too (and left a branch). Those histories replay as recorded.
    assert _store_steps(FOLDER / 'in_activity' / 'output_tool.json') == 1
    assert _store_steps(FOLDER / 'pydantic_ai_2_78' / 'output_tool.json') == 2
    assert _store_steps(FOLDER / 'canonical_form_2' / 'output_tool.json') == 1
    assert _store_steps(FOLDER / 'reload_after_failed_turn' / 'output_tool.json') == 1


def _loads_history(path: Path) -> int:
    return history_cost(path.read_text()).activities_matching('load_history')


def test_a_conversation_turn_after_a_failed_one_reloaded_the_stored_conversation_only_after_the_patch():
    assert _loads_history(FOLDER / 'canonical_form_2' / 'conversation_failed_turn.json') == 1
    assert _loads_history(FOLDER / 'reload_after_failed_turn' / 'conversation_failed_turn.json') == 2


@pytest.mark.parametrize('path', HISTORIES, ids=[str(path.relative_to(FOLDER)) for path in HISTORIES])
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
