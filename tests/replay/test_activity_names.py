"""The activity and workflow names a worker registers are compatibility data: pin them.

A running workflow's history records activity type names. Renaming one (or a capability id, an
agent name, a toolset id) makes every in-flight workflow fail to replay. If this test fails, the
change is breaking: keep the old name registered, or ship it with a versioning plan.

Only this project's names are pinned: its own activities, and those pydantic-ai derives from the
capability's id and the recall toolset's id. The rest of an agent's activities are pydantic-ai's to
name (2.78 added `model_count_tokens` and `external_event_ask`), and its own tests pin them.
"""

from __future__ import annotations

import re

import pytest
from temporalio import activity, workflow
from temporalio.client import Client

from temporal_recall.demo import agent as demo_agent
from temporal_recall.worker import build_worker

pytestmark = pytest.mark.temporal

PINNED_ACTIVITIES = {
    'temporal_recall.search',
    'temporal_recall.load_history',
    'agent__demo__toolset__recall-search__call_tool',
    'agent__demo__toolset__recall-search__validate_args',
    'agent__demo__capability__recall__store_step',
}

OUR_IDS = re.compile(r'__(capability__recall|toolset__recall-search)__')
"""The ids this project gives the capability and its toolset, which pydantic-ai puts in activity names."""

PINNED_WORKFLOWS = {'temporal_recall.RunPrompt', 'temporal_recall.Conversation'}


async def test_registered_activity_and_workflow_names_are_pinned(temporal_client: Client, tmp_path):
    worker = build_worker(
        temporal_client, task_queue='pin-names', agents=[demo_agent], store=f'sqlite:///{tmp_path / "pin.db"}'
    )
    config = worker.config(active_config=True)
    activity_names = {activity._Definition.must_from_callable(fn).name for fn in config['activities']}
    workflow_names = {workflow._Definition.must_from_class(cls).name for cls in config['workflows']}
    ours = {name for name in activity_names if name.startswith('temporal_recall.') or OUR_IDS.search(name)}
    assert ours == PINNED_ACTIVITIES
    assert 'agent__demo__model_request' in activity_names  # pydantic-ai's, for the agent the capability is on
    assert workflow_names >= PINNED_WORKFLOWS
