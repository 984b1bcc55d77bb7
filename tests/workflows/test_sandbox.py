"""Workflow code runs in Temporal's default sandbox, and the store never enters it."""

from __future__ import annotations

import uuid

import pytest
from temporalio.client import Client
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from temporal_recall.testing import running_worker

from .agents import weather_agent
from .sandbox_workflows import SandboxModulesWorkflow

pytestmark = pytest.mark.temporal


async def test_workflows_run_in_the_default_sandbox_without_store_modules(temporal_client: Client, store_url: str):
    async with running_worker(
        temporal_client, agents=[weather_agent], store=store_url, workflows=[SandboxModulesWorkflow]
    ) as worker:
        runner = worker.worker.config(active_config=True)['workflow_runner']
        assert isinstance(runner, SandboxedWorkflowRunner)
        leaked = await temporal_client.execute_workflow(
            SandboxModulesWorkflow.run, id=f'sandbox-{uuid.uuid4()}', task_queue=worker.task_queue
        )
    assert leaked == []
