"""One agent run per workflow, persisted at every step boundary, against a real dev server."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from temporal_recall import RecallDeps, RunPromptInput, RunPromptWorkflow
from temporal_recall.content import content_hash
from temporal_recall.store import AppendRequest
from temporal_recall.testing import running_worker

from .agents import output_tool_agent, weather_agent

pytestmark = pytest.mark.temporal


def _shape(messages):
    return [
        (type(m).__name__, [type(p).__name__ for p in m.parts if not type(p).__name__.startswith('Instruction')])
        for m in messages
    ]


async def _run(
    client: Client, task_queue: str, prompt: str, conversation_id: str, agent: str = 'weather', **extra
) -> object:
    return await client.execute_workflow(
        RunPromptWorkflow.run,
        RunPromptInput(prompt=prompt, conversation_id=conversation_id, agent=agent, **extra),
        id=f'run-{uuid.uuid4()}',
        task_queue=task_queue,
    )


async def test_three_step_run_stores_every_message_exactly_once(temporal_client: Client, store_url: str, read_store):
    async with running_worker(temporal_client, agents=[weather_agent], store=store_url) as worker:
        output = await _run(temporal_client, worker.task_queue, 'Weather in Paris?', 'conv-3step')
    assert output.output == 'Sunny in Paris.'
    entries = await read_store.load_entries('conv-3step')
    assert _shape([e.message for e in entries]) == [
        ('ModelRequest', ['UserPromptPart']),
        ('ModelResponse', ['ToolCallPart']),
        ('ModelRequest', ['ToolReturnPart']),
        ('ModelResponse', ['TextPart']),
    ]
    hashes = [content_hash(e.message) for e in entries]
    assert len(set(hashes)) == len(hashes) == 4


async def test_second_run_appends_only_what_it_added(temporal_client: Client, store_url: str, read_store):
    async with running_worker(temporal_client, agents=[weather_agent], store=store_url) as worker:
        await _run(temporal_client, worker.task_queue, 'Weather in Paris?', 'conv-two-runs')
        await _run(temporal_client, worker.task_queue, 'And tomorrow?', 'conv-two-runs')
    entries = await read_store.load_entries('conv-two-runs')
    assert len(entries) == 8
    prompts = [p.content for e in entries for p in e.message.parts if isinstance(p, UserPromptPart)]
    assert prompts == ['Weather in Paris?', 'And tomorrow?']
    record = await read_store.read_record('conv-two-runs')
    assert record.branches == []


async def test_plain_agent_run_persists_the_same_messages_as_temporal(
    temporal_client: Client, store_url: str, read_store, tmp_path
):
    async with running_worker(temporal_client, agents=[weather_agent], store=store_url) as worker:
        await _run(temporal_client, worker.task_queue, 'Weather in Paris?', 'conv-temporal')

    from temporal_recall import ConversationRecall
    from temporal_recall.store import open_store

    plain_store = await open_store(str(tmp_path / 'plain.db'))
    try:
        from pydantic_ai import Agent

        plain = Agent(
            weather_agent.model,
            name='weather_plain',
            deps_type=RecallDeps,
            tools=[weather_agent._function_toolset.tools['get_weather'].function],
            capabilities=[ConversationRecall(store=plain_store)],
        )
        await plain.run('Weather in Paris?', conversation_id='conv-plain', deps=RecallDeps())
        plain_entries = await plain_store.load_entries('conv-plain')
    finally:
        await plain_store.close()
    temporal_entries = await read_store.load_entries('conv-temporal')
    assert [content_hash(e.message) for e in plain_entries] == [content_hash(e.message) for e in temporal_entries]


async def test_empty_prompt_fails_the_workflow_with_a_clear_error(temporal_client: Client, store_url: str):
    async with running_worker(temporal_client, agents=[weather_agent], store=store_url) as worker:
        with pytest.raises(WorkflowFailureError) as failure:
            await _run(temporal_client, worker.task_queue, '   ', 'conv-empty')
    assert 'prompt is empty' in str(failure.value.cause)


async def test_a_prompt_no_payload_could_carry_fails_the_workflow_before_anything_runs(
    temporal_client: Client, store_url: str, read_store
):
    async with running_worker(temporal_client, agents=[weather_agent], store=store_url) as worker:
        with pytest.raises(WorkflowFailureError) as failure:
            await _run(temporal_client, worker.task_queue, 'x' * 2_001, 'conv-huge', max_prompt_bytes=2_000)
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == 'PayloadTooLarge' and cause.non_retryable
    assert '2,001 bytes' in str(cause) and 'max_prompt_bytes' in str(cause)
    assert await read_store.read_record('conv-huge') is None


async def test_an_unknown_agent_fails_the_workflow_instead_of_retrying_its_task(
    temporal_client: Client, store_url: str
):
    async with running_worker(temporal_client, agents=[weather_agent], store=store_url) as worker:
        with pytest.raises(WorkflowFailureError) as failure:
            await asyncio.wait_for(
                _run(temporal_client, worker.task_queue, 'hi', 'conv-nope', agent='nope'), timeout=30
            )
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == 'UnknownAgent'
    assert "No agent named 'nope'" in str(cause) and 'weather' in str(cause)


async def test_a_history_larger_than_a_payload_is_continued_from_its_newest_turns(
    temporal_client: Client, store_url: str, read_store
):
    """3 MB stored: every later run failed as PayloadTooLarge. Now the model gets the newest whole turns
    that fit, and the run's messages are stored after the whole conversation, not as a rewrite of it."""
    await store_big_history(read_store, 'conv-big')
    async with running_worker(temporal_client, agents=[weather_agent, output_tool_agent], store=store_url) as worker:
        await _run(temporal_client, worker.task_queue, 'Weather in Oslo?', 'conv-big')
        # Ends in an output tool: its return is written by store_step, from workflow code.
        await _run(temporal_client, worker.task_queue, 'And in Bergen?', 'conv-big', agent='output_tool')
    entries = await read_store.load_entries('conv-big')
    assert entries is not None
    prompts = [p.content for e in entries for p in e.message.parts if isinstance(p, UserPromptPart)]
    assert prompts == [*BIG_PROMPTS, 'Weather in Oslo?', 'And in Bergen?']
    assert len(entries) == 20 + 4 + 5
    record = await read_store.read_record('conv-big')
    assert record is not None and record.branches == [], 'nothing was stored as a rewrite'


BIG_PROMPTS = [f'turn {n}: ' + 'y' * 300_000 for n in range(10)]


async def store_big_history(store, conversation_id: str) -> None:
    """Ten turns of 300 KB: 3 MB, twice what one payload may carry."""
    messages = []
    for n, prompt in enumerate(BIG_PROMPTS):
        messages += [ModelRequest(parts=[UserPromptPart(prompt)]), ModelResponse(parts=[TextPart(f'ok {n}')])]
    await store.append(
        AppendRequest(
            conversation_id=conversation_id,
            scope=None,
            idempotency_key='big-1',
            base_length=0,
            base_hash=None,
            messages=messages,
        )
    )


async def test_unknown_conversation_is_refused_when_creation_is_off(
    temporal_client: Client, store_url: str, read_store
):
    async with running_worker(temporal_client, agents=[weather_agent], store=store_url) as worker:
        with pytest.raises(WorkflowFailureError) as failure:
            await _run(temporal_client, worker.task_queue, 'hi', 'conv-missing', create=False)
    assert "'conv-missing' is not in the store" in str(failure.value.cause)
    assert await read_store.read_record('conv-missing') is None


async def test_scope_isolates_writes(temporal_client: Client, store_url: str, read_store):
    async with running_worker(temporal_client, agents=[weather_agent], store=store_url) as worker:
        await _run(temporal_client, worker.task_queue, 'Weather in Paris?', 'conv-scoped', scope='tenant-a')
        # Another tenant naming the same conversation id cannot read or extend it.
        with pytest.raises(WorkflowFailureError):
            await _run(temporal_client, worker.task_queue, 'Weather in Rome?', 'conv-scoped', scope='tenant-b')
    record = await read_store.read_record('conv-scoped')
    assert record.scope == 'tenant-a'
    entries = await read_store.load_entries('conv-scoped')
    assert len(entries) == 4
    assert all('Rome' not in str(e.message) for e in entries)


async def test_conversation_usage_counts_each_model_request_once(temporal_client: Client, store_url: str, read_store):
    async with running_worker(temporal_client, agents=[weather_agent], store=store_url) as worker:
        await _run(temporal_client, worker.task_queue, 'Weather in Paris?', 'conv-usage')
        await _run(temporal_client, worker.task_queue, 'And tomorrow?', 'conv-usage')
    record = await read_store.read_record('conv-usage')
    assert record.usage.requests == 4  # two runs of two model requests each
    assert record.usage.tool_calls == 2
