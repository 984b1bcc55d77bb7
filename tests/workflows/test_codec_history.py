"""RecallDataCodec under Temporal: a small history, the same results, replay from the store alone."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic_ai import Agent
from temporalio.client import Client, WorkflowFailureError

from temporal_recall import RunPromptInput, RunPromptWorkflow, message_codec_plugin
from temporal_recall.testing import (
    DevServer,
    HistorySize,
    connect,
    export_history,
    history_size,
    replay,
    running_worker,
)

from .agents import forecast_45_agent, forecast_200_agent, many_tools_agent

pytestmark = [pytest.mark.temporal, pytest.mark.slow]

HISTORY_LIMIT = 50 * 1024 * 1024
"""Temporal's default history size limit (`limit.historySize.error`); the dev server enforces it too."""


@dataclass(frozen=True)
class Run:
    output: str | None
    """`None` when the run did not complete."""
    size: HistorySize
    workflow_id: str


async def _run(client: Client, agent: Agent[Any, str], store_url: str) -> Run:
    workflow_id = f'codec-{uuid.uuid4()}'
    request = RunPromptInput(
        prompt='go', conversation_id=workflow_id, agent=agent.name or '', continue_history=False, request_limit=None
    )
    output: str | None = None
    async with running_worker(client, agents=[agent], store=store_url) as worker:
        try:
            result = await client.execute_workflow(
                RunPromptWorkflow.run,
                request,
                id=workflow_id,
                task_queue=worker.task_queue,
            )
            output = result.output
        except WorkflowFailureError:
            pass  # the caller asserts on how the history ended
    return Run(output=output, size=await history_size(client, workflow_id), workflow_id=workflow_id)


async def test_codec_shrinks_history_and_replays_from_the_store(
    temporal_dev_server: DevServer, temporal_client: Client, store_url: str
):
    plain = await _run(temporal_client, many_tools_agent, store_url)
    plugin = message_codec_plugin(store_url)
    try:
        coded_client = await connect(temporal_dev_server, plugins=[plugin])
        coded = await _run(coded_client, many_tools_agent, store_url)
        history = await export_history(coded_client, coded.workflow_id)
    finally:
        await plugin.codec.aclose()
    plain_bytes, coded_bytes = plain.size.total_bytes, coded.size.total_bytes
    print(f'45 tool calls: history {plain_bytes:,} B without the codec, {coded_bytes:,} B with it')
    assert coded.output == plain.output == 'Checked 45 cities.'
    assert coded.size.total_bytes <= 0.15 * plain.size.total_bytes

    # A fresh codec (empty cache) replays the history with the store as the only source of bodies.
    replay_plugin = message_codec_plugin(store_url)
    try:
        await replay([history], agents=[many_tools_agent], plugins=[replay_plugin])
    finally:
        await replay_plugin.codec.aclose()


async def test_45_and_200_tool_calls_with_and_without_the_codec(
    temporal_dev_server: DevServer, temporal_client: Client, store_url: str
):
    """The issue's measurement: one agent whose tool answers ~1.8 KB, 45 and 200 calls, both ways."""
    plugin = message_codec_plugin(store_url)
    try:
        coded_client = await connect(temporal_dev_server, plugins=[plugin])
        runs = {
            ('45', 'no codec'): await _run(temporal_client, forecast_45_agent, store_url),
            ('45', 'codec'): await _run(coded_client, forecast_45_agent, store_url),
            ('200', 'codec'): await _run(coded_client, forecast_200_agent, store_url),
            ('200', 'no codec'): await _run(temporal_client, forecast_200_agent, store_url),
        }
    finally:
        await plugin.codec.aclose()
    for (calls, codec), run in runs.items():
        print(
            f'{calls:>3} tool calls, {codec:8}: history {run.size.total_bytes:>12,} B, largest payload '
            f'{run.size.largest_payload:>9,} B, {run.size.events:>5,} events, ended with {run.size.last_event}'
        )
    plain_45, coded_45 = runs['45', 'no codec'], runs['45', 'codec']
    coded_200, plain_200 = runs['200', 'codec'], runs['200', 'no codec']
    ratio = coded_45.size.total_bytes / plain_45.size.total_bytes
    print(f'45 calls: the codec history is {ratio:.1%} of the plain one')

    assert coded_45.output == plain_45.output == 'Checked 45 cities.'
    assert coded_45.size.total_bytes <= 0.15 * plain_45.size.total_bytes
    assert coded_200.output == 'Checked 200 cities.'
    assert coded_200.size.total_bytes < 10_000_000
    # Without the codec, the server itself stops the 200-call run at its history size limit.
    assert plain_200.output is None
    assert plain_200.size.last_event == 'workflow_execution_terminated_event_attributes'
    assert plain_200.size.total_bytes > HISTORY_LIMIT
