"""Recall through Temporal finds what a conversation said, whatever the model's context kept: a history
window, runs started without history, a compaction, pydantic-ai-harness's summary shape; through the model's
tool on a worker with `RecallPlugin` and through workflow `recall()`, on a real dev server."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import CompactionPart, ModelMessage, ModelRequest, SystemPromptPart
from pydantic_ai.models.function import FunctionModel
from temporalio.client import Client

from temporal_recall import ConversationRecall, RecallDeps, RunPromptInput, RunPromptOutput, RunPromptWorkflow
from temporal_recall.search import SearchResult
from temporal_recall.store import open_store
from temporal_recall.testing import running_worker

from .._compaction import SUMMARY as COMPACTION_SUMMARY
from .agents import (  # pyright: ignore[reportPrivateUsage]
    _recall_then_answer,
    compacting_agent,
    recall_agent,
    windowed_recall_agent,
)
from .recall_workflows import RecallWorkflow

pytestmark = pytest.mark.temporal


async def _turn(client: Client, task_queue: str, agent: str, conversation_id: str, prompt: str, **extra: Any) -> str:
    output: RunPromptOutput = await client.execute_workflow(
        RunPromptWorkflow.run,
        RunPromptInput(prompt=prompt, conversation_id=conversation_id, agent=agent, **extra),
        id=f'run-{uuid.uuid4()}',
        task_queue=task_queue,
    )
    return output.output


async def _recalled(client: Client, task_queue: str, conversation_id: str, query: str) -> list[str]:
    result: SearchResult = await client.execute_workflow(
        RecallWorkflow.run,
        args=[conversation_id, query, False],
        id=f'recall-{uuid.uuid4()}',
        task_queue=task_queue,
    )
    return [hit.excerpt for hit in result.hits]


async def test_turns_a_history_window_left_behind_are_found_on_turn_4(
    temporal_client: Client, any_store_url: str
) -> None:
    async with running_worker(
        temporal_client, agents=[windowed_recall_agent], store=any_store_url, workflows=[RecallWorkflow]
    ) as worker:
        for prompt in ('I like apricot', 'I like blueberry', 'I like cherry'):
            assert await _turn(temporal_client, worker.task_queue, 'windowed', 'conv-window', prompt) == 'ok'
        answer = await _turn(temporal_client, worker.task_queue, 'windowed', 'conv-window', 'recall apricot')
        assert 'I like apricot' in answer
        assert await _recalled(temporal_client, worker.task_queue, 'conv-window', 'blueberry') == ['I like blueberry']


async def test_runs_started_without_history_are_all_found(temporal_client: Client, any_store_url: str) -> None:
    async with running_worker(
        temporal_client, agents=[recall_agent], store=any_store_url, workflows=[RecallWorkflow]
    ) as worker:
        for prompt in ('Grüße aus München', '東京タワーは赤い', 'the parcel went to Berlin'):
            await _turn(temporal_client, worker.task_queue, 'recaller', 'conv-fresh', prompt, continue_history=False)
        answer = await _turn(
            temporal_client, worker.task_queue, 'recaller', 'conv-fresh', 'recall München', continue_history=False
        )
        assert 'Grüße aus München' in answer
        assert await _recalled(temporal_client, worker.task_queue, 'conv-fresh', '東京タワー') == ['東京タワーは赤い']


@pytest.mark.parametrize(
    'summary',
    [
        pytest.param(ModelRequest(parts=[CompactionPart(content='A passphrase was shared.')]), id='compaction'),
        pytest.param(
            ModelRequest(parts=[SystemPromptPart('Summary of previous conversation:\n\nA passphrase was shared.')]),
            id='harness-summary',
        ),
    ],
)
async def test_text_a_summary_replaced_is_found(
    temporal_client: Client, any_store_url: str, summary: ModelMessage
) -> None:
    """The conversation continues from a summary in place of its first run (written by the application's
    own agent, outside Temporal); a workflow run after it still finds what the summary replaced."""
    store = await open_store(any_store_url)
    try:
        writer: Agent[RecallDeps, str] = Agent(
            FunctionModel(_recall_then_answer, model_name='writer'),
            deps_type=RecallDeps,
            capabilities=[ConversationRecall(store=store)],
        )
        await writer.run('the ZEBRA-93 passphrase is 42', deps=RecallDeps(), conversation_id='conv-summary')
        history: list[ModelMessage] = [summary]
        await writer.run(
            'what did I share?', message_history=history, deps=RecallDeps(), conversation_id='conv-summary'
        )
    finally:
        await store.close()
    async with running_worker(
        temporal_client, agents=[recall_agent], store=any_store_url, workflows=[RecallWorkflow]
    ) as worker:
        assert await _recalled(temporal_client, worker.task_queue, 'conv-summary', 'ZEBRA-93') == [
            'the ZEBRA-93 passphrase is 42'
        ]
        answer = await _turn(temporal_client, worker.task_queue, 'recaller', 'conv-summary', 'recall ZEBRA-93')
        assert 'the ZEBRA-93 passphrase is 42' in answer


async def test_text_core_compaction_dropped_is_found(temporal_client: Client, any_store_url: str) -> None:
    """pydantic-ai's own compaction inside the workflow (past 4 messages the earlier turns become a summary):
    the model's tool and workflow `recall()` still find what it dropped."""
    async with running_worker(
        temporal_client, agents=[compacting_agent], store=any_store_url, workflows=[RecallWorkflow]
    ) as worker:
        for prompt in ('the ZEBRA-93 passphrase is 42', 'order B-7 ships Friday', 'I live in Lyon'):
            assert await _turn(temporal_client, worker.task_queue, 'compacting', 'conv-compact', prompt) == 'ok'
        assert await _recalled(temporal_client, worker.task_queue, 'conv-compact', 'ZEBRA-93') == [
            'the ZEBRA-93 passphrase is 42'
        ]
        assert await _recalled(temporal_client, worker.task_queue, 'conv-compact', 'earlier orders') == []
        answer = await _turn(temporal_client, worker.task_queue, 'compacting', 'conv-compact', 'recall ZEBRA-93')
        assert 'the ZEBRA-93 passphrase is 42' in answer
    store = await open_store(any_store_url)
    try:
        conversation = await store.load('conv-compact')
        assert conversation is not None
        # The head holds the compacted history, summary first; what it replaced stays stored, searchable.
        summaries = [p.content for m in conversation.messages for p in m.parts if isinstance(p, CompactionPart)]
        assert summaries == [COMPACTION_SUMMARY]
        report = await store.check()
        assert report.clean, report.findings
    finally:
        await store.close()
