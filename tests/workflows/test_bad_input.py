"""Bad ids and queries chosen by the model, or passed by workflow code, fail clearly and are never retried.

The model chooses the recall tool's `query` and `run_id`. A NUL byte there used to reach the
PostgreSQL driver inside the tool's activity, which failed in a way Temporal retries; now the tool
answers a refusal the model can read, and the run completes. Workflow code that passes a bad id to
`recall()` fails the workflow with a non-retryable error instead of failing its task forever.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import TemporalDurability
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from temporal_recall import ConversationRecall, RecallDeps, RunPromptInput, RunPromptWorkflow
from temporal_recall._validation import MAX_ID_LENGTH
from temporal_recall.testing import running_worker

from ..replay.workflows import RecallDirectlyWorkflow
from .workflows import RecallQueryWorkflow

pytestmark = pytest.mark.temporal


def _call_the_tool_as_told(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The prompt is the tool's JSON arguments; the answer repeats what the tool returned."""
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    returns = [part for part in last.parts if isinstance(part, ToolReturnPart)]
    if returns:
        return ModelResponse(parts=[TextPart(f'The tool said: {returns[0].model_response_str()}')])
    arguments = json.loads(str(last.parts[-1].content))
    return ModelResponse(parts=[ToolCallPart('search_conversation_history', arguments, tool_call_id='search-1')])


bad_args_agent = Agent(
    FunctionModel(_call_the_tool_as_told, model_name='bad-args'),
    name='bad_args',
    deps_type=RecallDeps,
    capabilities=[ConversationRecall(), TemporalDurability()],
)


async def _attempts(client: Client, workflow_id: str) -> list[int]:
    """The attempt number of every activity the workflow ran: all 1 when nothing was retried."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return [
        event.activity_task_started_event_attributes.attempt
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]


async def test_bad_tool_arguments_answer_a_refusal_and_the_run_completes(
    temporal_client: Client, any_store_url: str
) -> None:
    async with running_worker(temporal_client, agents=[bad_args_agent], store=any_store_url) as worker:

        async def run(arguments: dict[str, str]) -> tuple[str, str]:
            workflow_id = f'bad-args-{uuid.uuid4()}'
            result = await asyncio.wait_for(
                temporal_client.execute_workflow(
                    RunPromptWorkflow.run,
                    RunPromptInput(
                        prompt=json.dumps(arguments), conversation_id='conv-bad-args', agent='bad_args', scope='acme'
                    ),
                    id=workflow_id,
                    task_queue=worker.task_queue,
                ),
                timeout=60,
            )
            return result.output, workflow_id

        seeded, _ = await run({'query': 'Paris weather'})
        assert 'Search refused' not in seeded
        for arguments, problem in [
            ({'query': 'Paris', 'run_id': '\x00'}, 'control character U+0000'),
            ({'query': 'Paris', 'run_id': 'run-\x1b[0m'}, 'control character U+001B'),
            ({'query': 'Paris', 'run_id': 'r' * 10_000}, f'longer than {MAX_ID_LENGTH} characters'),
            ({'query': 'Paris\x00weather'}, 'control character U+0000'),
        ]:
            output, workflow_id = await run(arguments)
            assert output.startswith('The tool said: Search refused: '), output
            assert problem in output
            assert len(output) < 400  # the refusal quotes at most the start of a long value
            assert set(await _attempts(temporal_client, workflow_id)) == {1}


async def test_recall_from_workflow_code_with_a_bad_id_fails_the_workflow_without_retrying(
    temporal_client: Client, store_url: str
) -> None:
    async with running_worker(
        temporal_client, agents=[bad_args_agent], store=store_url, workflows=[RecallDirectlyWorkflow]
    ) as worker:
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(
                temporal_client.execute_workflow(
                    RecallDirectlyWorkflow.run, 'a\x00b', id=f'direct-{uuid.uuid4()}', task_queue=worker.task_queue
                ),
                timeout=60,
            )
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == 'InvalidIdentifier' and cause.non_retryable
    assert 'control character U+0000' in cause.message


@pytest.mark.parametrize('query', ['?!...', '—', '*** ### ***'])
async def test_recall_refuses_a_query_without_searchable_terms_before_scheduling(
    temporal_client: Client, store_url: str, query: str
) -> None:
    workflow_id = f'unsearchable-{uuid.uuid4()}'
    async with running_worker(temporal_client, agents=[], store=store_url, workflows=[RecallQueryWorkflow]) as worker:
        with pytest.raises(WorkflowFailureError) as failed:
            await temporal_client.execute_workflow(
                RecallQueryWorkflow.run, query, id=workflow_id, task_queue=worker.task_queue
            )
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError), failed.value
    assert cause.type == 'InvalidQuery' and cause.non_retryable
    assert 'no words in it' in cause.message
    history = await temporal_client.get_workflow_handle(workflow_id).fetch_history()
    scheduled = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]
    assert scheduled == [], 'refused in workflow code: no search activity was scheduled'
