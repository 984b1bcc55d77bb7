"""Persistence from inside the model-request activity, on a real dev server: every message of every run is
stored exactly once and in order, matching `all_messages()`, at no extra activity (an output tool's return
costs one), through retries that answer differently and attempts that write too late."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, SystemPromptPart, TextPart, UserPromptPart
from temporalio.client import Client, WorkflowFailureError

from temporal_recall import RunPromptInput
from temporal_recall.capability._marker import MARKER_KEY
from temporal_recall.capability._step_write import persistable
from temporal_recall.content import content_hash, held_hashes
from temporal_recall.store import open_store
from temporal_recall.testing import export_history, history_cost, running_worker

from .agents import (
    echo_agent,
    late_attempt_agent,
    output_tool_agent,
    output_tool_agent_no_persistence,
    retried_agent,
    streaming_agent,
    weather_agent,
    weather_agent_no_persistence,
)
from .workflows import AllMessagesWorkflow, GivenHistoryInput, GivenHistoryWorkflow, RunHistory

pytestmark = [pytest.mark.temporal, pytest.mark.slow]

AGENTS = [
    weather_agent,
    weather_agent_no_persistence,
    output_tool_agent,
    output_tool_agent_no_persistence,
    streaming_agent,
    retried_agent,
    late_attempt_agent,
    echo_agent,
]


async def _run(client: Client, queue: str, agent: str, conversation_id: str, **extra: Any) -> tuple[RunHistory, str]:
    workflow_id = f'in-activity-{uuid.uuid4()}'
    result = await client.execute_workflow(
        AllMessagesWorkflow.run,
        RunPromptInput(prompt='Weather in Paris?', conversation_id=conversation_id, agent=agent, **extra),
        id=workflow_id,
        task_queue=queue,
    )
    return result, workflow_id


async def _current_branch(read_store: Any, conversation_id: str) -> list[ModelMessage]:
    entries = await read_store.load_entries(conversation_id)
    return [entry.message for entry in entries or []]


def _hashes(messages: list[ModelMessage]) -> list[str]:
    return [content_hash(message) for message in messages]


async def _assert_stored_exactly(read_store: Any, conversation_id: str, messages: list[ModelMessage]) -> None:
    stored = await _current_branch(read_store, conversation_id)
    assert _hashes(stored) == _hashes(persistable(messages))
    record = await read_store.read_record(conversation_id)
    assert record is not None and record.branches == []
    # Nobody sees the marker: not the run, not the store.
    assert not any(isinstance(m, ModelResponse) and m.metadata and MARKER_KEY in m.metadata for m in messages)
    assert not any(isinstance(m, ModelResponse) and m.metadata and MARKER_KEY in m.metadata for m in stored)


async def test_text_and_tool_runs_store_all_messages_at_no_extra_temporal_cost(
    temporal_client: Client, store_url: str, read_store
):
    async with running_worker(
        temporal_client, agents=AGENTS, store=store_url, workflows=[AllMessagesWorkflow]
    ) as worker:
        persisted, with_id = await _run(temporal_client, worker.task_queue, 'weather', 'conv-ia-3step')
        _, without_id = await _run(temporal_client, worker.task_queue, 'weather_bare', 'conv-ia-bare')
    await _assert_stored_exactly(read_store, 'conv-ia-3step', persisted.messages)
    assert len(persisted.messages) == 4
    with_cost = history_cost(await export_history(temporal_client, with_id))
    without_cost = history_cost(await export_history(temporal_client, without_id))
    assert with_cost.activity_count == without_cost.activity_count == 3
    assert with_cost.events == without_cost.events
    assert with_cost.activities_matching('__store_step') == 0
    usage = (await read_store.read_record('conv-ia-3step')).usage
    assert (usage.requests, usage.tool_calls) == (2, 1)


async def test_a_run_ending_in_an_output_tool_costs_one_activity(temporal_client: Client, store_url: str, read_store):
    async with running_worker(
        temporal_client, agents=AGENTS, store=store_url, workflows=[AllMessagesWorkflow]
    ) as worker:
        persisted, with_id = await _run(temporal_client, worker.task_queue, 'output_tool', 'conv-ia-output')
        _, without_id = await _run(temporal_client, worker.task_queue, 'output_bare', 'conv-ia-output-bare')
    await _assert_stored_exactly(read_store, 'conv-ia-output', persisted.messages)
    assert len(persisted.messages) == 5  # ends in the output tool's return
    with_cost = history_cost(await export_history(temporal_client, with_id))
    without_cost = history_cost(await export_history(temporal_client, without_id))
    assert with_cost.activity_count == without_cost.activity_count + 1
    assert with_cost.activities_matching('__store_step') == 1


async def test_a_streamed_run_stores_every_message_once(temporal_client: Client, store_url: str, read_store):
    async with running_worker(
        temporal_client, agents=AGENTS, store=store_url, workflows=[AllMessagesWorkflow]
    ) as worker:
        persisted, workflow_id = await _run(temporal_client, worker.task_queue, 'streaming', 'conv-ia-stream')
    await _assert_stored_exactly(read_store, 'conv-ia-stream', persisted.messages)
    assert len(persisted.messages) == 8
    cost = history_cost(await export_history(temporal_client, workflow_id))
    assert cost.activities_matching('__model_request_stream') == 4
    assert cost.activities_matching('__store_step') == 0


async def test_a_run_failing_after_tool_calls_keeps_their_results(temporal_client: Client, store_url: str, read_store):
    async with running_worker(
        temporal_client, agents=AGENTS, store=store_url, workflows=[AllMessagesWorkflow]
    ) as worker:
        with pytest.raises(WorkflowFailureError) as failure:
            # One model request allowed: the tool runs, then the second request is refused in workflow code.
            await _run(temporal_client, worker.task_queue, 'weather', 'conv-ia-error', request_limit=1)
    assert 'request_limit' in str(failure.value.cause) or 'request' in str(failure.value.cause)
    stored = await _current_branch(read_store, 'conv-ia-error')
    assert [type(m).__name__ for m in stored] == ['ModelRequest', 'ModelResponse', 'ModelRequest']
    assert [type(p).__name__ for p in stored[-1].parts] == ['ToolReturnPart']


async def test_a_retried_model_activity_that_answers_differently_supersedes_the_first_answer(
    temporal_client: Client, store_url: str, tmp_path
):
    """Attempt 1 stores its answer, then fails; attempt 2 answers differently and becomes the head."""
    store = await open_store(store_url)
    failing = FailAfterFirstAnswer(store)
    try:
        async with running_worker(
            temporal_client, agents=AGENTS, store=failing, workflows=[AllMessagesWorkflow]
        ) as worker:
            persisted, _ = await _run(temporal_client, worker.task_queue, 'retried', 'conv-ia-retried')
        assert failing.failed == 1
        assert persisted.messages[-1].parts == [TextPart('answer from attempt 2')]  # type: ignore[union-attr]
        stored = [entry.message for entry in await store.load_entries('conv-ia-retried') or []]
        assert _hashes(stored) == _hashes(persisted.messages)
        record = await store.read_record('conv-ia-retried')
        assert record is not None and len(record.branches) == 1
        # Each attempt's model request is counted; the tool call it carried the result of, once.
        assert (record.usage.requests, record.usage.tool_calls) == (3, 1)
        superseded = [entry.message for entry in await store.read_history(record.branches[0])]
        assert superseded[:-1] == stored[:-1] or _hashes(superseded[:-1]) == _hashes(stored[:-1])
        assert superseded[-1].parts == [TextPart('answer from attempt 1')]  # type: ignore[union-attr]
    finally:
        await store.close()


async def test_a_stale_attempt_writing_late_stores_nothing(temporal_client: Client, store_url: str):
    """Attempt 1 outlives its timeout on a worker that is still alive; its late write is refused."""
    store = await open_store(store_url)
    watching = RecordFences(store)
    try:
        async with running_worker(
            temporal_client, agents=AGENTS, store=watching, workflows=[AllMessagesWorkflow]
        ) as worker:
            persisted, _ = await _run(temporal_client, worker.task_queue, 'late_attempt', 'conv-ia-late')
            for _ in range(100):  # attempt 1 wakes up 5 s after it started, then tries to write
                if watching.fenced:
                    break
                await asyncio.sleep(0.1)
        assert watching.fenced, 'the stale attempt never tried to write'
        assert persisted.messages[-1].parts == [TextPart('answer from attempt 2')]  # type: ignore[union-attr]
        stored = [entry.message for entry in await store.load_entries('conv-ia-late') or []]
        assert _hashes(stored) == _hashes(persisted.messages)
        record = await store.read_record('conv-ia-late')
        assert record is not None and record.branches == []
        assert 'attempt 1' not in str([m.parts for m in stored])
    finally:
        await store.close()


class FailAfterFirstAnswer:
    """The real store; the first committed text answer is followed by a failure, so the activity is retried."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.failed = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def append(self, request: Any) -> Any:
        result = await self._store.append(request)
        last = request.messages[-1] if request.messages else None
        if not self.failed and isinstance(last, ModelResponse) and isinstance(last.parts[0], TextPart):
            self.failed += 1
            raise RuntimeError('the worker lost its connection right after the write committed')
        return result


class RecordFences:
    """The real store, recording every write it refused as coming from a superseded attempt."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.fenced: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def append(self, request: Any) -> Any:
        result = await self._store.append(request)
        if result.fenced:
            self.fenced.append(request)
        return result


async def _run_from(
    client: Client, queue: str, agent: str, conversation_id: str, prompt: str, history: list[ModelMessage]
):
    workflow_id = f'given-history-{uuid.uuid4()}'
    result = await client.execute_workflow(
        GivenHistoryWorkflow.run,
        GivenHistoryInput(prompt=prompt, conversation_id=conversation_id, agent=agent, history=history),
        id=workflow_id,
        task_queue=queue,
    )
    return result.messages, workflow_id


async def test_a_history_ending_in_a_request_is_stored_once_without_a_branch(
    temporal_client: Client, store_url: str, read_store
):
    # pydantic-ai merges the two consecutive requests into one before the model (and the activity) sees them.
    # (Not the prompt's own words: said again right after, they would be said once, `capability._repeated_prompts`.)
    history: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart('Answer in one line.')])]
    async with running_worker(
        temporal_client, agents=AGENTS, store=store_url, workflows=[GivenHistoryWorkflow]
    ) as worker:
        echoed, _ = await _run_from(
            temporal_client, worker.task_queue, 'echo', 'conv-merged', 'repeat this exactly', history
        )
        weather, _ = await _run_from(
            temporal_client, worker.task_queue, 'weather', 'conv-merged-tools', 'Paris?', history
        )
    assert len(echoed) == 3
    assert len(weather) == 5  # a tool step after the merged request
    # The activity stored the two requests as the model was sent them, merged; the workflow's write of
    # the run's history reads as the same messages (`store/log/_pending.py`), so nothing else is stored.
    for conversation_id, messages in (('conv-merged', echoed), ('conv-merged-tools', weather)):
        stored = await _current_branch(read_store, conversation_id)
        assert [digest for digest, _ in held_hashes(stored)] == [digest for digest, _ in held_hashes(messages)]
        assert len(stored) == len(messages) - 1
        assert (await read_store.read_record(conversation_id)).branches == []


async def test_a_mid_history_system_prompt_is_stored_as_the_run_holds_it(
    temporal_client: Client, store_url: str, read_store
):
    # The model has no inline system prompts: the activity sees this as `<system>` user text.
    system = ModelRequest(parts=[SystemPromptPart('Answer tersely.')])
    hello = [ModelRequest(parts=[UserPromptPart('Hi')]), ModelResponse(parts=[TextPart('Hello.')])]
    async with running_worker(
        temporal_client, agents=AGENTS, store=store_url, workflows=[GivenHistoryWorkflow]
    ) as worker:
        queue = worker.task_queue
        # Just before the prompt, it is also merged with the prompt's request.
        stored_hello, _ = await _run_from(temporal_client, queue, 'echo', 'conv-system-merged', 'Hi', [])
        merged, _ = await _run_from(
            temporal_client, queue, 'weather', 'conv-system-merged', 'Paris?', [*stored_hello, system]
        )
        first, _ = await _run_from(
            temporal_client,
            queue,
            'weather',
            'conv-system',
            'Paris?',
            [*hello, system, ModelResponse([TextPart('Ok.')])],
        )
        # Continuing the stored conversation, the rendered system prompt lies before what each step adds:
        # the activities store the steps, at no extra activity.
        second, second_id = await _run_from(temporal_client, queue, 'weather', 'conv-system', 'And Rome?', first)
    assert len(merged) == 7
    assert _hashes(await _current_branch(read_store, 'conv-system-merged')) == _hashes(merged)
    assert len(second) == 12
    stored = await _current_branch(read_store, 'conv-system')
    assert _hashes(stored) == _hashes(second)
    assert isinstance(stored[2].parts[0], SystemPromptPart)
    assert history_cost(await export_history(temporal_client, second_id)).activities_matching('__store_step') == 0
