"""A conversation run under Temporal with the codec on in one tenant scope, for the codec-server tests."""

from __future__ import annotations

import uuid

from temporalio.client import Client

from temporal_recall import RunPromptInput, RunPromptWorkflow, message_codec_plugin
from temporal_recall.testing import DevServer, connect, running_worker

from .agents import ledger_agent


async def run_with_codec(server: DevServer, store_url: str, scope: str) -> str:
    """Run `ledger_agent` once with the codec of `scope`; returns the workflow id."""
    plugin = message_codec_plugin(store_url, scope=scope)
    workflow_id = f'codec-server-{uuid.uuid4()}'
    try:
        client: Client = await connect(server, plugins=[plugin])
        async with running_worker(client, agents=[ledger_agent], store=store_url) as worker:
            result = await client.execute_workflow(
                RunPromptWorkflow.run,
                RunPromptInput(prompt='Where is P-1?', conversation_id=workflow_id, agent='ledger'),
                id=workflow_id,
                task_queue=worker.task_queue,
            )
        assert result.output == 'On shelf 4.'
    finally:
        await plugin.codec.aclose()
    return workflow_id
