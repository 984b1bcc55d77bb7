"""`RunPromptWorkflow`s on one conversation after one whose model request failed for good, and a
`ConversationWorkflow` turn after a failed one.

The failed run's prompt was stored before its model request, so the conversation holds it with no
answer. The next workflow continues from it, whether it says something new or retries the same
prompt: the model is sent each prompt once, and the store holds each message once, in order, without
a branch, at no Temporal cost on the turns after.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError, WorkflowUpdateFailedError

from temporal_recall import (
    ConversationInput,
    ConversationWorkflow,
    RunPromptInput,
    RunPromptOutput,
    RunPromptWorkflow,
    TurnInput,
)
from temporal_recall.content import content_hash
from temporal_recall.testing import export_history, history_cost, replay, running_worker

from .._said import user_prompts
from .agents import FLAKY_ONCE, FLAKY_SENT, flaky_agent, flaky_system_agent

pytestmark = pytest.mark.temporal

AGENTS = ['flaky', 'flaky_system']
"""The same provider, the second agent with a system prompt (stored in the failed request, with its prompt)."""


async def _conversation(
    client: Client, store_url: str, agent: str, prompts: list[str]
) -> tuple[str, list[RunPromptOutput], list[str]]:
    """Run `prompts` as workflows on a new conversation, the first one failing; its id, the others' outputs, all ids."""
    conversation_id = f'failed-{uuid.uuid4()}'
    FLAKY_SENT.clear()
    ids: list[str] = []
    async with running_worker(client, agents=[flaky_agent, flaky_system_agent], store=store_url) as worker:
        run: Callable[[str], Awaitable[RunPromptOutput]]

        async def run(prompt: str) -> RunPromptOutput:
            ids.append(f'run-{uuid.uuid4()}')
            given = RunPromptInput(prompt=prompt, conversation_id=conversation_id, scope='acme', agent=agent)
            return await client.execute_workflow(RunPromptWorkflow.run, given, id=ids[-1], task_queue=worker.task_queue)

        with pytest.raises(WorkflowFailureError):
            await run(prompts[0])
        outputs = [await run(prompt) for prompt in prompts[1:]]
    return conversation_id, outputs, ids


async def _assert_held_once(store: Any, conversation_id: str, prompts: list[str], kinds: list[str]) -> None:
    messages = [entry.message for entry in await store.load_entries(conversation_id, scope='acme')]
    assert user_prompts(messages) == prompts
    assert [message.kind for message in messages] == kinds
    assert len({content_hash(message) for message in messages}) == len(messages)
    assert (await store.read_record(conversation_id)).branches == []
    assert (await store.check()).findings == []


@pytest.mark.parametrize('agent', AGENTS)
async def test_the_workflow_after_a_failed_model_request_continues_from_its_prompt(
    temporal_client: Client, any_store_url: str, any_store: Any, agent: str
):
    prompts = ['fail: what is the weather in Oslo?', 'And in Madrid?', 'And in Rome?']
    conversation_id, outputs, ids = await _conversation(temporal_client, any_store_url, agent, prompts)
    assert [output.output for output in outputs] == [f'ok: {prompt}' for prompt in prompts[1:]]
    assert list(FLAKY_SENT) == [prompts[:1], prompts[:2], prompts]
    await _assert_held_once(
        any_store, conversation_id, prompts, ['request', 'request', 'response', 'request', 'response']
    )
    costs = [history_cost(await export_history(temporal_client, workflow_id)) for workflow_id in ids]
    # The model was sent the stored request merged with the new one, which the run holds apart: the
    # workflow writes that step (one `store_step`), as for any request the model is sent merged.
    # The turn after costs what any turn costs: its model request stored it.
    assert [cost.activities_matching('__store_step') for cost in costs[1:]] == [1, 0]


@pytest.mark.parametrize('agent', AGENTS)
async def test_a_workflow_retrying_the_failed_prompt_says_it_once(
    temporal_client: Client, any_store_url: str, any_store: Any, agent: str
):
    prompt = f'What is the weather in Oslo? ({uuid.uuid4()})'
    FLAKY_ONCE.add(prompt)
    conversation_id, outputs, ids = await _conversation(temporal_client, any_store_url, agent, [prompt, prompt])
    assert [output.output for output in outputs] == [f'ok: {prompt}']
    assert list(FLAKY_SENT) == [[prompt], [prompt]]
    await _assert_held_once(any_store, conversation_id, [prompt], ['request', 'response'])
    # With a system prompt, the retried run holds it in a request of its own before the prompt's,
    # which the model is sent merged: the workflow writes that step (one `store_step`).
    cost = history_cost(await export_history(temporal_client, ids[-1]))
    assert cost.activities_matching('__store_step') == (1 if agent == 'flaky_system' else 0)


async def test_a_conversation_workflow_continues_from_a_failed_turn_without_a_branch(
    temporal_client: Client, any_store_url: str, any_store: Any
):
    """The shipped `ConversationWorkflow`: a turn whose model request fails for good fails its Update; the
    next turn follows the failed prompt on the head, as the turn after a failed `RunPromptWorkflow` does."""
    conversation_id = f'failed-turn-{uuid.uuid4()}'
    prompts = ['What is the weather in Oslo?', 'fail: and in Madrid?', 'And in Rome?']
    FLAKY_SENT.clear()
    async with running_worker(temporal_client, agents=[flaky_agent], store=any_store_url) as worker:
        handle = await temporal_client.start_workflow(
            ConversationWorkflow.run,
            ConversationInput(conversation_id=conversation_id, scope='acme', agent='flaky', turns_per_run=10),
            id=conversation_id,
            task_queue=worker.task_queue,
        )
        answers: list[str | None] = []
        for prompt in prompts:
            try:
                answers.append(
                    (await handle.execute_update(ConversationWorkflow.send, TurnInput(prompt=prompt))).output
                )
            except WorkflowUpdateFailedError:
                answers.append(None)
        await handle.signal(ConversationWorkflow.close)
        await handle.result()
    assert answers == [f'ok: {prompts[0]}', None, f'ok: {prompts[2]}']
    # The model was sent the failed prompt once more, with the next one: it is part of the conversation.
    assert FLAKY_SENT[-1] == prompts
    await _assert_held_once(
        any_store, conversation_id, prompts, ['request', 'response', 'request', 'request', 'response']
    )
    history = await export_history(temporal_client, conversation_id)
    await replay([history], agents=[flaky_agent])
