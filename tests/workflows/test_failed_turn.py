"""`RunPromptWorkflow`s on one conversation after one whose model request failed for good.

The failed run's prompt was stored before its model request, so the conversation holds it with no
answer. The next workflow continues from it: the model is sent each prompt once, and the store holds
each message once, in order, without a branch, at no Temporal cost on the turns after.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from pydantic_ai.messages import ModelRequest
from temporalio.client import Client, WorkflowFailureError

from temporal_recall import RunPromptInput, RunPromptWorkflow
from temporal_recall.content import content_hash
from temporal_recall.testing import export_history, history_cost, running_worker

from .agents import FLAKY_SENT, flaky_agent

pytestmark = pytest.mark.temporal

PROMPTS = ('fail: what is the weather in Oslo?', 'And in Madrid?', 'And in Rome?')
"""The flaky agent's provider fails a turn whose prompt starts with `fail`, and answers the others."""


def _prompts(messages: list[Any]) -> list[str]:
    return [
        str(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if part.part_kind == 'user-prompt'
    ]


async def test_the_workflow_after_a_failed_model_request_continues_from_its_prompt(
    temporal_client: Client, any_store_url: str, any_store: Any
):
    conversation_id = f'failed-{uuid.uuid4()}'
    FLAKY_SENT.clear()
    ids: list[str] = []
    async with running_worker(temporal_client, agents=[flaky_agent], store=any_store_url) as worker:

        async def run(prompt: str) -> Any:
            ids.append(f'run-{uuid.uuid4()}')
            given = RunPromptInput(prompt=prompt, conversation_id=conversation_id, scope='acme', agent='flaky')
            return await temporal_client.execute_workflow(
                RunPromptWorkflow.run, given, id=ids[-1], task_queue=worker.task_queue
            )

        with pytest.raises(WorkflowFailureError):
            await run(PROMPTS[0])
        outputs = [await run(prompt) for prompt in PROMPTS[1:]]
    assert [output.output for output in outputs] == [f'ok: {prompt}' for prompt in PROMPTS[1:]]
    assert FLAKY_SENT == [list(PROMPTS[:1]), list(PROMPTS[:2]), list(PROMPTS)]
    messages = [entry.message for entry in await any_store.load_entries(conversation_id, scope='acme')]
    assert _prompts(messages) == list(PROMPTS)
    assert [message.kind for message in messages] == ['request', 'request', 'response', 'request', 'response']
    assert len({content_hash(message) for message in messages}) == len(messages)
    assert (await any_store.read_record(conversation_id)).branches == []
    assert (await any_store.check()).findings == []
    # The turn after the continued one costs what any turn costs: its model request stored it.
    assert history_cost(await export_history(temporal_client, ids[-1])).activities_matching('__store_step') == 0
