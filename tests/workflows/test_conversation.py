"""The long-lived conversation workflow: many turns, continue-as-new, persistence and recall across the chain."""

from __future__ import annotations

import uuid

import pytest
from temporalio.client import Client, WorkflowUpdateFailedError

from temporal_recall import ConversationInput, ConversationWorkflow, SearchRequest, TurnInput
from temporal_recall.testing import history_cost, running_worker

from .agents import weather_agent

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


TURNS = 12
PER_RUN = 5
"""Three runs (5, 5 and 2 turns): continue-as-new twice, as the 50-turn conversation with 20 per run did."""


async def test_a_long_conversation_continues_as_new_and_persists_the_whole_chain(
    temporal_client: Client, store_url: str, read_store
):
    workflow_id = f'conversation-{uuid.uuid4()}'
    async with running_worker(temporal_client, agents=[weather_agent], store=store_url) as worker:
        handle = await temporal_client.start_workflow(
            ConversationWorkflow.run,
            ConversationInput(conversation_id='conv-long', agent='weather', turns_per_run=PER_RUN),
            id=workflow_id,
            task_queue=worker.task_queue,
        )
        outputs = []
        for turn in range(TURNS):
            out = await handle.execute_update(
                ConversationWorkflow.send, TurnInput(prompt=f'Turn {turn}: ticket T-{turn:04d}')
            )
            outputs.append(out)
            handle = temporal_client.get_workflow_handle_for(ConversationWorkflow.run, workflow_id)
        assert [o.turn for o in outputs] == list(range(1, TURNS + 1))
        found = await handle.execute_update(ConversationWorkflow.search, SearchRequest(query='T-0003'))
        await handle.signal(ConversationWorkflow.close)
        summary = await handle.result()
    assert summary.turns == TURNS
    runs = [run async for run in temporal_client.list_workflows(f"WorkflowId = '{workflow_id}'")]
    assert len(runs) >= 3, 'continue-as-new happened at least twice'
    turns_per_run = []
    for run in runs:
        history = await temporal_client.get_workflow_handle(workflow_id, run_id=run.run_id).fetch_history()
        assert len(history.events) < 2_000, 'no single run grows without bound'
        sends = [
            event
            for event in history.events
            if event.HasField('workflow_execution_update_accepted_event_attributes')
            and event.workflow_execution_update_accepted_event_attributes.accepted_request.input.name == 'send'
        ]
        assert len(sends) <= PER_RUN, 'each run takes at most turns_per_run turns, then continues as new'
        turns_per_run.append(len(sends))
        # Every turn ends in text, so each model request's own activity stored it: no store_step at all.
        assert history_cost(history).activities_matching('__store_step') == 0
    assert sum(turns_per_run) == TURNS
    entries = await read_store.load_entries('conv-long')
    assert len(entries) == TURNS * 4
    prompts = [p.content for e in entries for p in e.message.parts if type(p).__name__ == 'UserPromptPart']
    assert prompts == [f'Turn {t}: ticket T-{t:04d}' for t in range(TURNS)]
    # Exactly once and in order: each turn is prompt, tool call, tool return, answer, and nothing branched off.
    shapes = [[type(part).__name__ for part in e.message.parts] for e in entries]
    turn = [['UserPromptPart'], ['ToolCallPart'], ['ToolReturnPart'], ['TextPart']]
    assert [[kind for kind in shape if not kind.startswith('Instruction')] for shape in shapes] == turn * TURNS
    record = await read_store.read_record('conv-long')
    assert record.branches == []
    assert (record.usage.requests, record.usage.tool_calls) == (2 * TURNS, TURNS)
    assert found.hits and 'T-0003' in found.hits[0].excerpt


async def test_send_rejects_an_empty_prompt(temporal_client: Client, store_url: str):
    async with running_worker(temporal_client, agents=[weather_agent], store=store_url) as worker:
        handle = await temporal_client.start_workflow(
            ConversationWorkflow.run,
            ConversationInput(conversation_id='conv-empty-turn', agent='weather'),
            id=f'conversation-{uuid.uuid4()}',
            task_queue=worker.task_queue,
        )
        with pytest.raises(WorkflowUpdateFailedError) as failure:
            await handle.execute_update(ConversationWorkflow.send, TurnInput(prompt=''))
        assert 'prompt is empty' in str(failure.value.cause)
        await handle.signal(ConversationWorkflow.close)
        assert (await handle.result()).turns == 0
