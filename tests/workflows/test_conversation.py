"""The long-lived conversation workflow: many turns, continue-as-new, persistence and recall across the chain."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from temporal_recall import ConversationInput, ConversationWorkflow, SearchRequest, TurnInput
from temporal_recall.testing import RunningWorker, history_cost, running_worker

from .agents import flaky_agent, slow_turn_agent, weather_agent
from .test_run_prompt import BIG_PROMPTS, store_big_history

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


async def _start(client: Client, worker: RunningWorker, given: ConversationInput) -> WorkflowHandle[Any, Any]:
    return await client.start_workflow(
        ConversationWorkflow.run, given, id=f'conversation-{uuid.uuid4()}', task_queue=worker.task_queue
    )


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
        handle = await _start(
            temporal_client, worker, ConversationInput(conversation_id='conv-empty-turn', agent='weather')
        )
        with pytest.raises(WorkflowUpdateFailedError) as failure:
            await handle.execute_update(ConversationWorkflow.send, TurnInput(prompt=''))
        assert 'prompt is empty' in str(failure.value.cause)
        await handle.signal(ConversationWorkflow.close)
        assert (await handle.result()).turns == 0


def _cause_type(failure: pytest.ExceptionInfo[WorkflowUpdateFailedError]) -> str | None:
    cause = failure.value.cause
    return cause.type if isinstance(cause, ApplicationError) else None


async def test_send_and_search_refuse_what_they_cannot_do_before_the_history_sees_it(
    temporal_client: Client, store_url: str
):
    async with running_worker(temporal_client, agents=[weather_agent], store=store_url) as worker:
        handle = await _start(
            temporal_client,
            worker,
            ConversationInput(conversation_id='conv-guarded', agent='weather', max_prompt_bytes=1_000),
        )
        with pytest.raises(WorkflowUpdateFailedError) as too_large:
            await handle.execute_update(ConversationWorkflow.send, TurnInput(prompt='x' * 1_001))
        assert _cause_type(too_large) == 'PayloadTooLarge' and '1,001 bytes' in str(too_large.value.cause)
        refused = []
        for bad in (
            SearchRequest(query='Paris', limit=-5),
            SearchRequest(query='Paris', context_lines=10**6),
            SearchRequest(query='Paris', k1=-1),
            SearchRequest(query='Paris', all_conversations=True),
            SearchRequest(query='Paris', exclude_run_id='r1'),
        ):
            with pytest.raises(WorkflowUpdateFailedError) as failure:
                await handle.execute_update(ConversationWorkflow.search, bad)
            refused.append(_cause_type(failure))
        assert refused == ['InvalidSearchParameters'] * 5
        answered = await handle.execute_update(ConversationWorkflow.send, TurnInput(prompt='Weather in Paris?'))
        found = await handle.execute_update(ConversationWorkflow.search, SearchRequest(query='Paris', limit=3))
        await handle.signal(ConversationWorkflow.close)
        assert (await handle.result()).turns == 1
        history = await handle.fetch_history()
    assert answered.turn == 1 and found.hits
    accepted = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED]
    assert len(accepted) == 2, 'a refused Update leaves nothing in the history'


async def test_send_refuses_an_agent_the_worker_does_not_have(temporal_client: Client, store_url: str):
    async with running_worker(temporal_client, agents=[weather_agent], store=store_url) as worker:
        handle = await _start(temporal_client, worker, ConversationInput(conversation_id='conv-no-agent', agent='nope'))
        with pytest.raises(WorkflowUpdateFailedError) as failure:
            await handle.execute_update(ConversationWorkflow.send, TurnInput(prompt='hi'))
        assert _cause_type(failure) == 'UnknownAgent' and "No agent named 'nope'" in str(failure.value.cause)
        await handle.signal(ConversationWorkflow.close)
        assert (await handle.result()).turns == 0


async def test_a_turn_in_progress_is_not_idle_time(temporal_client: Client, store_url: str):
    async with running_worker(temporal_client, agents=[slow_turn_agent], store=store_url) as worker:
        handle = await _start(
            temporal_client,
            worker,
            ConversationInput(conversation_id='conv-idle', agent='slow_turn', idle_timeout_seconds=1.5),
        )
        # About three seconds: the timeout fires during the turn, which must not close the conversation.
        first = await handle.execute_update(ConversationWorkflow.send, TurnInput(prompt='wait for me'))
        second = await handle.execute_update(ConversationWorkflow.send, TurnInput(prompt='and once more'))
        summary = await handle.result()  # idle for 1.5 s after the second turn
    assert (first.turn, second.turn, summary.turns) == (1, 2, 2)


async def test_a_conversation_stored_past_one_payload_goes_on(temporal_client: Client, store_url: str, read_store):
    await store_big_history(read_store, 'conv-big-chat')
    async with running_worker(temporal_client, agents=[weather_agent], store=store_url) as worker:
        handle = await _start(
            temporal_client,
            worker,
            ConversationInput(conversation_id='conv-big-chat', agent='weather', turns_per_run=1),
        )
        for prompt in ('Weather in Oslo?', 'And in Bergen?'):  # the second in a run of its own
            await handle.execute_update(ConversationWorkflow.send, TurnInput(prompt=prompt))
        await handle.signal(ConversationWorkflow.close)
        assert (await handle.result()).turns == 2
    entries = await read_store.load_entries('conv-big-chat')
    prompts = [p.content for e in entries for p in e.message.parts if type(p).__name__ == 'UserPromptPart']
    assert prompts == [*BIG_PROMPTS, 'Weather in Oslo?', 'And in Bergen?']
    assert (await read_store.read_record('conv-big-chat')).branches == []


async def test_overlapping_sends_still_let_each_run_continue_as_new(
    temporal_client: Client, store_url: str, read_store
):
    """Three clients sending back to back never leave a quiet moment: one run took all 45 turns. Now a
    run takes at most twice `turns_per_run`; later sends are refused as `ContinuingAsNew`, and re-sent."""
    workflow_id = f'conversation-{uuid.uuid4()}'
    async with running_worker(temporal_client, agents=[weather_agent], store=store_url) as worker:
        await temporal_client.start_workflow(
            ConversationWorkflow.run,
            ConversationInput(conversation_id='conv-busy', agent='weather', turns_per_run=2),
            id=workflow_id,
            task_queue=worker.task_queue,
        )
        handle = temporal_client.get_workflow_handle_for(ConversationWorkflow.run, workflow_id)
        refused: list[str | None] = []

        async def client(name: str) -> None:
            for turn in range(5):
                while True:
                    try:
                        await handle.execute_update(ConversationWorkflow.send, TurnInput(prompt=f'{name} {turn}'))
                        break
                    except WorkflowUpdateFailedError as failure:
                        cause = failure.cause
                        refused.append(cause.type if isinstance(cause, ApplicationError) else None)
                        await asyncio.sleep(0.05)

        await asyncio.wait_for(asyncio.gather(*(client(name) for name in 'abc')), timeout=120)
        await handle.signal(ConversationWorkflow.close)
        assert (await handle.result()).turns == 15
    assert set(refused) <= {'ContinuingAsNew'}
    runs = [run async for run in temporal_client.list_workflows(f"WorkflowId = '{workflow_id}'")]
    for run in runs:
        history = await temporal_client.get_workflow_handle(workflow_id, run_id=run.run_id).fetch_history()
        accepted = [
            e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
        ]
        assert len(accepted) <= 4, 'a run takes at most twice turns_per_run'
    entries = await read_store.load_entries('conv-busy')
    prompts = sorted(p.content for e in entries for p in e.message.parts if type(p).__name__ == 'UserPromptPart')
    assert prompts == sorted(f'{name} {turn}' for name in 'abc' for turn in range(5)), 'each turn once'


async def test_failed_turns_take_no_share_of_a_run(temporal_client: Client, store_url: str):
    """Four failed turns (a provider outage) must not use up the run's sends: the next ones are answered."""
    async with running_worker(temporal_client, agents=[flaky_agent], store=store_url) as worker:
        handle = await _start(
            temporal_client, worker, ConversationInput(conversation_id='conv-flaky', agent='flaky', turns_per_run=2)
        )
        for n in range(4):
            with pytest.raises(WorkflowUpdateFailedError):
                await handle.execute_update(ConversationWorkflow.send, TurnInput(prompt=f'fail {n}'))
        answered = await handle.execute_update(ConversationWorkflow.send, TurnInput(prompt='hello'))
        await handle.signal(ConversationWorkflow.close)
        await handle.result()
    assert answered.output == 'ok: hello'
