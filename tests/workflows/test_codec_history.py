"""RecallDataCodec under Temporal: a small history, the same results, replay from the store alone.

At a test's size: 15 calls of a tool answering 1.8 KB, and a dev server whose history limit is
300 KB. `scripts/measure_history_size.py` measures the full sizes (45 and 200 calls against the
default 50 MB limit, which stops the 200-call run without the codec).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic_ai import Agent
from temporalio.client import Client, WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from temporal_recall import RunPromptInput, RunPromptWorkflow, message_codec_plugin
from temporal_recall._devserver import find_temporal_cli
from temporal_recall.testing import (
    DevServer,
    HistorySize,
    connect,
    export_history,
    history_size,
    replay,
    running_worker,
)

from .agents import forecast_15_agent

pytestmark = [pytest.mark.temporal, pytest.mark.slow]

HISTORY_LIMIT = 300_000
"""The history size limit (`limit.historySize.error`, 50 MB by default) of the server that stops a run:
between the 15-call run's history with the codec (about 40 KB) and without it (about 550 KB)."""


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
    plain = await _run(temporal_client, forecast_15_agent, store_url)
    plugin = message_codec_plugin(store_url)
    try:
        coded_client = await connect(temporal_dev_server, plugins=[plugin])
        coded = await _run(coded_client, forecast_15_agent, store_url)
        history = await export_history(coded_client, coded.workflow_id)
    finally:
        await plugin.codec.aclose()
    plain_bytes, coded_bytes = plain.size.total_bytes, coded.size.total_bytes
    print(f'15 tool calls: history {plain_bytes:,} B without the codec, {coded_bytes:,} B with it')
    assert coded.output == plain.output == 'Checked 15 cities.'
    assert coded.size.total_bytes <= 0.15 * plain.size.total_bytes

    # A fresh codec (empty cache) replays the history with the store as the only source of bodies.
    replay_plugin = message_codec_plugin(store_url)
    try:
        await replay([history], agents=[forecast_15_agent], plugins=[replay_plugin])
    finally:
        await replay_plugin.codec.aclose()


async def test_the_server_stops_a_run_at_its_history_limit_unless_the_codec_keeps_it_small(store_url: str):
    extra = ['--dynamic-config-value', f'limit.historySize.error={HISTORY_LIMIT}']
    extra += ['--dynamic-config-value', f'limit.historySize.warn={HISTORY_LIMIT // 2}']
    server = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(find_temporal_cli()), dev_server_extra_args=extra
    )
    plugin = message_codec_plugin(store_url)
    async with server:
        address = server.client.service_client.config.target_host
        try:
            plain = await _run(await connect(address), forecast_15_agent, store_url)
            coded = await _run(await connect(address, plugins=[plugin]), forecast_15_agent, store_url)
        finally:
            await plugin.codec.aclose()
    for name, run in (('no codec', plain), ('codec', coded)):
        print(f'{name:8}: history {run.size.total_bytes:>9,} B, {run.size.events:>4} events, {run.size.last_event}')
    assert coded.output == 'Checked 15 cities.'
    assert coded.size.total_bytes < HISTORY_LIMIT
    # Without the codec, the server itself stops the run at its history size limit.
    assert plain.output is None
    assert plain.size.last_event == 'workflow_execution_terminated_event_attributes'
    assert plain.size.total_bytes > HISTORY_LIMIT
