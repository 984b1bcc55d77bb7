"""The role filter through workflow code: `recall(role=...)` and the `search` Update, on both backends."""

from __future__ import annotations

import uuid

import pytest
from temporalio.client import Client, WorkflowFailureError

from temporal_recall import ConversationInput, ConversationWorkflow, SearchRequest, TurnInput
from temporal_recall.testing import running_worker

from .agents import briefed_weather_agent, weather_agent
from .role_workflows import RecallByRoleWorkflow

pytestmark = pytest.mark.temporal


async def test_recall_and_the_search_update_filter_by_role(temporal_client: Client, any_store_url: str) -> None:
    workflow_id = f'conversation-{uuid.uuid4()}'
    async with running_worker(
        temporal_client, agents=[weather_agent], store=any_store_url, workflows=[RecallByRoleWorkflow]
    ) as worker:
        handle = await temporal_client.start_workflow(
            ConversationWorkflow.run,
            ConversationInput(conversation_id='conv-role', agent='weather'),
            id=workflow_id,
            task_queue=worker.task_queue,
        )
        # Stores: the user's question, the get_weather call, its return, the answer; all mention Paris.
        await handle.execute_update(ConversationWorkflow.send, TurnInput(prompt='Weather in Paris?'))

        everything = await handle.execute_update(ConversationWorkflow.search, SearchRequest(query='Paris'))
        assert sorted(hit.role for hit in everything.hits) == ['assistant', 'assistant', 'tool', 'user']
        for role in ('user', 'assistant', 'tool'):
            updated = await handle.execute_update(ConversationWorkflow.search, SearchRequest(query='Paris', role=role))
            recalled = await temporal_client.execute_workflow(
                RecallByRoleWorkflow.run,
                args=['conv-role', role],
                id=f'recall-{uuid.uuid4()}',
                task_queue=worker.task_queue,
            )
            expected = sorted(hit.position for hit in everything.hits if hit.role == role)
            for result in (updated, recalled):
                assert sorted(hit.position for hit in result.hits) == expected, role
                assert {hit.role for hit in result.hits} == {role}
        # An unknown role fails the recalling workflow, once, with the reason.
        with pytest.raises(WorkflowFailureError) as refused:
            await temporal_client.execute_workflow(
                RecallByRoleWorkflow.run,
                args=['conv-role', 'robot'],
                id=f'recall-{uuid.uuid4()}',
                task_queue=worker.task_queue,
            )
        assert "role='robot' is not a role" in str(refused.value.cause)
        await handle.signal(ConversationWorkflow.close)
        await handle.result()


async def test_a_system_prompt_is_recalled_as_the_systems_words(temporal_client: Client, any_store_url: str) -> None:
    """The system prompt and the first user prompt ride one request: `recall(role=...)` and the `search`
    Update find each under its own speaker, showing only that speaker's words."""
    async with running_worker(
        temporal_client, agents=[briefed_weather_agent], store=any_store_url, workflows=[RecallByRoleWorkflow]
    ) as worker:
        handle = await temporal_client.start_workflow(
            ConversationWorkflow.run,
            ConversationInput(conversation_id='conv-briefed', agent='briefed_weather'),
            id=f'conversation-{uuid.uuid4()}',
            task_queue=worker.task_queue,
        )
        await handle.execute_update(ConversationWorkflow.send, TurnInput(prompt='Weather in Paris?'))
        expected = {
            'system': [(0, 'system', 'You are the Paris desk of a weather service.')],
            'user': [(0, 'user', 'Weather in Paris?')],
        }
        for role, hits in expected.items():
            updated = await handle.execute_update(ConversationWorkflow.search, SearchRequest(query='Paris', role=role))
            recalled = await temporal_client.execute_workflow(
                RecallByRoleWorkflow.run,
                args=['conv-briefed', role],
                id=f'recall-{uuid.uuid4()}',
                task_queue=worker.task_queue,
            )
            for result in (updated, recalled):
                assert [(hit.position, hit.role, hit.excerpt) for hit in result.hits] == hits, role
        await handle.signal(ConversationWorkflow.close)
        await handle.result()
