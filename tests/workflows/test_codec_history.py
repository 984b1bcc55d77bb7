"""RecallDataCodec under Temporal: smaller history, same results, replay from the store alone."""

from __future__ import annotations

import uuid

import pytest
from temporalio.client import Client

from temporal_recall import RunPromptInput, RunPromptWorkflow, message_codec_plugin
from temporal_recall.testing import DevServer, connect, export_history, replay, running_worker

from .agents import many_tools_agent

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


async def _run(client: Client, store_url: str) -> tuple[str, int, str]:
    workflow_id = f'codec-{uuid.uuid4()}'
    async with running_worker(client, agents=[many_tools_agent], store=store_url) as worker:
        result = await client.execute_workflow(
            RunPromptWorkflow.run,
            RunPromptInput(prompt='go', conversation_id=workflow_id, agent='many_tools', continue_history=False),
            id=workflow_id,
            task_queue=worker.task_queue,
        )
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return result.output, sum(event.ByteSize() for event in history.events), workflow_id


async def test_codec_shrinks_history_and_replays_from_the_store(
    temporal_dev_server: DevServer, temporal_client: Client, store_url: str
):
    plain_output, plain_bytes, _ = await _run(temporal_client, store_url)
    plugin = message_codec_plugin(store_url)
    try:
        coded_client = await connect(temporal_dev_server, plugins=[plugin])
        coded_output, coded_bytes, workflow_id = await _run(coded_client, store_url)
        history = await export_history(coded_client, workflow_id)
    finally:
        await plugin.codec.aclose()
    print(f'45 tool calls: history {plain_bytes:,} B without the codec, {coded_bytes:,} B with it')
    assert coded_output == plain_output == 'Checked 45 cities.'
    assert coded_bytes < plain_bytes / 2

    # A fresh codec (empty cache) replays the history with the store as the only source of bodies.
    replay_plugin = message_codec_plugin(store_url)
    try:
        await replay([history], agents=[many_tools_agent], plugins=[replay_plugin])
    finally:
        await replay_plugin.codec.aclose()
