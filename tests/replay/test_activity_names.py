"""The activity and workflow names a worker registers are compatibility data: pin them.

A running workflow's history records activity type names. Renaming one (or a capability id, an
agent name, a toolset id) makes every in-flight workflow fail to replay. If this test fails, the
change is breaking: keep the old name registered, or ship it with a versioning plan.
"""

from __future__ import annotations

import pytest
from temporalio import activity, workflow
from temporalio.client import Client

from temporal_recall.demo import agent as demo_agent
from temporal_recall.worker import build_worker

pytestmark = pytest.mark.temporal

PINNED_ACTIVITIES = {
    'temporal_recall.search',
    'temporal_recall.load_history',
    'agent__demo__model_request',
    'agent__demo__model_request_stream',
    'agent__demo__model_compact_messages',
    'agent__demo__model_cancel_suspended_response',
    'agent__demo__toolset__<agent>__call_tool',
    'agent__demo__toolset__<agent>__validate_args',
    'agent__demo__toolset__recall-search__call_tool',
    'agent__demo__toolset__recall-search__validate_args',
    'agent__demo__capability__recall__store_step',
}

PINNED_WORKFLOWS = {'temporal_recall.RunPrompt', 'temporal_recall.Conversation'}


async def test_registered_activity_and_workflow_names_are_pinned(temporal_client: Client, tmp_path):
    worker = build_worker(
        temporal_client, task_queue='pin-names', agents=[demo_agent], store=f'sqlite:///{tmp_path / "pin.db"}'
    )
    config = worker.config(active_config=True)
    activity_names = {activity._Definition.must_from_callable(fn).name for fn in config['activities']}
    workflow_names = {workflow._Definition.must_from_class(cls).name for cls in config['workflows']}
    assert activity_names == PINNED_ACTIVITIES
    assert workflow_names >= PINNED_WORKFLOWS
