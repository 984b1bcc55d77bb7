"""One conversation: begun in the chat UI, continued by `RunPromptWorkflow` (a real dev server), then in the UI."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from pydantic_ai.messages import ModelRequest
from temporalio.client import Client

from temporal_recall import RunPromptInput, RunPromptWorkflow
from temporal_recall.content import content_hash
from temporal_recall.testing import running_worker

from ._chat import VercelChat, asgi_client, chat_app
from .agents import ORDER_QUESTION, chat_agent, durable_chat_agent

pytestmark = pytest.mark.temporal


async def test_ui_then_workflow_then_ui_holds_every_message_once(
    temporal_client: Client, any_store_url: str, any_store: Any
):
    chat_id = f'chat-{uuid.uuid4()}'
    async with asgi_client(chat_app(chat_agent(any_store), any_store)) as http:
        tab = VercelChat(http, chat_id, 'acme')
        first = await tab.send(ORDER_QUESTION)
        async with running_worker(temporal_client, agents=[durable_chat_agent], store=any_store_url) as worker:
            middle = await temporal_client.execute_workflow(
                RunPromptWorkflow.run,
                RunPromptInput(prompt='Thanks!', conversation_id=chat_id, scope='acme', agent='chat'),
                id=f'run-{uuid.uuid4()}',
                task_queue=worker.task_queue,
            )
        last = await tab.send('recall Tuesday')
    assert (first.error, last.error) == (None, None)
    assert middle.output == 'You said: Thanks!'
    entries = await any_store.load_entries(chat_id, scope='acme')
    messages = [entry.message for entry in entries]
    prompts = [
        part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if part.part_kind == 'user-prompt'
    ]
    assert prompts == [ORDER_QUESTION, 'Thanks!', 'recall Tuesday']
    assert len(messages) == 4 + 2 + 4
    assert len({content_hash(message) for message in messages}) == len(messages)
    assert (await any_store.read_record(chat_id)).branches == []
    assert (await any_store.check()).findings == []
    # The UI's last turn found what the UI's first turn said, past the workflow's turn.
    assert 'arriving Tuesday' in last.tool_outputs['search_conversation_history']


async def test_a_workflow_stores_its_responses_with_the_runs_ids(
    temporal_client: Client, any_store_url: str, any_store: Any
):
    """Written inside the model-request activity, each response carries the run's `run_id` and `conversation_id`."""
    async with running_worker(temporal_client, agents=[durable_chat_agent], store=any_store_url) as worker:
        output = await temporal_client.execute_workflow(
            RunPromptWorkflow.run,
            RunPromptInput(prompt=ORDER_QUESTION, conversation_id='wf-chat', scope='acme', agent='chat'),
            id=f'run-{uuid.uuid4()}',
            task_queue=worker.task_queue,
        )
    messages = [entry.message for entry in await any_store.load_entries('wf-chat', scope='acme')]
    assert [message.kind for message in messages] == ['request', 'response', 'request', 'response']
    assert {(message.run_id, message.conversation_id) for message in messages} == {(output.run_id, 'wf-chat')}
