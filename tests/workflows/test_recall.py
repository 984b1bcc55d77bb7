"""Recall against a real dev server: the model's tool and workflow code both find an earlier run's
detail in the same conversation, and nothing from other conversations or scopes."""

from __future__ import annotations

import uuid

import pytest
from temporalio.client import Client, WorkflowFailureError

from temporal_recall import RunPromptInput, RunPromptWorkflow
from temporal_recall.testing import running_worker

from ..replay.workflows import RecallDirectlyWorkflow
from .agents import recall_agent, weather_agent

pytestmark = pytest.mark.temporal


async def _run(client: Client, queue: str, agent: str, prompt: str, conversation_id: str, scope: str | None = None):
    return await client.execute_workflow(
        RunPromptWorkflow.run,
        RunPromptInput(prompt=prompt, conversation_id=conversation_id, agent=agent, scope=scope),
        id=f'recall-{uuid.uuid4()}',
        task_queue=queue,
    )


async def test_model_tool_and_workflow_recall_find_an_earlier_run_and_nothing_else(
    temporal_client: Client, store_url: str
):
    agents = [weather_agent, recall_agent]
    async with running_worker(
        temporal_client, agents=agents, store=store_url, workflows=[RecallDirectlyWorkflow]
    ) as worker:
        queue = worker.task_queue
        await _run(temporal_client, queue, 'weather', 'Weather in Paris?', 'conv-mine')
        await _run(temporal_client, queue, 'recaller', 'My locker code is 9931.', 'conv-other')

        # The model calls search_conversation_history in a later run of the same conversation.
        mine = await _run(temporal_client, queue, 'recaller', 'recall Paris', 'conv-mine')
        assert 'Weather in Paris?' in mine.output
        # The same tool in another conversation does not see conv-mine's Paris.
        other = await _run(temporal_client, queue, 'recaller', 'recall Paris', 'conv-other')
        assert 'No earlier messages matched' in other.output
        assert 'Weather in' not in other.output and 'Sunny' not in other.output
        leaked = await _run(temporal_client, queue, 'recaller', 'recall 9931', 'conv-mine')
        assert 'No earlier messages matched' in leaked.output and 'locker' not in leaked.output

        # Workflow code recalls without the model.
        direct = await temporal_client.execute_workflow(
            RecallDirectlyWorkflow.run, 'conv-mine', id=f'direct-{uuid.uuid4()}', task_queue=queue
        )
        assert direct.hits and all(hit.conversation_id == 'conv-mine' for hit in direct.hits)
        assert any('Paris' in hit.excerpt for hit in direct.hits)
        none = await temporal_client.execute_workflow(
            RecallDirectlyWorkflow.run, 'conv-other', id=f'direct-{uuid.uuid4()}', task_queue=queue
        )
        assert all('Weather in' not in hit.excerpt and 'Sunny' not in hit.excerpt for hit in none.hits)
        missing = await temporal_client.execute_workflow(
            RecallDirectlyWorkflow.run, 'conv-does-not-exist', id=f'direct-{uuid.uuid4()}', task_queue=queue
        )
        assert missing.hits == [] and missing.message


async def test_scope_is_enforced_for_the_model_tool(temporal_client: Client, store_url: str):
    async with running_worker(temporal_client, agents=[weather_agent, recall_agent], store=store_url) as worker:
        queue = worker.task_queue
        await _run(temporal_client, queue, 'weather', 'Weather in Paris?', 'conv-tenant', scope='acme')
        # Same conversation id, other tenant: the write is refused, so nothing of acme's leaks.
        found = await _run(temporal_client, queue, 'recaller', 'recall Paris', 'conv-tenant', scope='acme')
        assert 'Weather in Paris?' in found.output
        with pytest.raises(WorkflowFailureError) as refused:
            await _run(temporal_client, queue, 'recaller', 'recall Paris', 'conv-tenant', scope='globex')
        assert "'conv-tenant' is not in the store" in str(refused.value.cause.cause)
