"""The reference side of the Temporal rows: `StepPersistence` under pydantic-ai 2.62's own Temporal integration.

Runs in `bench/.reference-venv` (pydantic-ai-slim 2.62, pydantic-ai-harness 0.62) against the dev
server the driver started, and imports only that virtualenv's packages and the standard library.
It is wired the way 2.62 documents: a plain `Agent` carrying a `TemporalDurability` capability,
listed in `__pydantic_ai_agents__` of a `PydanticAIWorkflow`, with `PydanticAIPlugin` on the client
(its worker inherits it and registers the agents' activities). "With persistence" adds harness
`StepPersistence` over a `SqliteStepStore` before `TemporalDurability`, as its README places it;
its store operations are durable operations, so they run as activities. "Without" is the same agent
without it, in the same virtualenv, so both rows share pydantic-ai 2.62's baseline.

The agents live at module level next to the workflow, as 2.62's Temporal docs write them (and
as pydantic-ai requires: an agent with `TemporalDurability` may not be built in workflow code).
The workflow sandbox re-executes this file (as `__temporal_main__`) for every workflow, so it
rebuilds them there; that copy only routes calls to activities, which run on the worker's own
agents, so its store is never opened. Both copies read the same parsed command line at import (the
sandbox gets the worker's from `_sidekit.parse_temporal_args`, cached in a passed-through module),
so they build the same agents, and only for the workloads asked for: with `StepPersistence` one
takes about 3 s to build on 2.62 (pydantic schemas for its durable operations' arguments), paid
again in each workflow's first task; hence the long workflow task timeout.

    bench/.reference-venv/bin/python bench/_temporal_reference.py HOST:PORT OUT.json --step-store STEPS.db \\
        [--workloads three_step,tool_loop_45]
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from _sidekit import (
        TEMPORAL_PROMPT,
        WORKFLOW_TASK_TIMEOUT,
        agent_name,
        get_weather,
        history_cost,
        parse_temporal_args,
        scripted_turn,
        write_result_and_exit,
    )
    from pydantic_ai import Agent
    from pydantic_ai.agent.abstract import AbstractAgent
    from pydantic_ai.durable_exec.temporal import PydanticAIPlugin, PydanticAIWorkflow, TemporalDurability
    from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai_harness.step_persistence import (  # pyright: ignore[reportMissingImports]  (only in the reference venv)
        SqliteStepStore,
        StepPersistence,
    )
    from temporalio.client import Client
    from temporalio.worker import Worker

ARGS = parse_temporal_args(step_store=True)
STORE = SqliteStepStore(database=ARGS.step_store)


def scripted_model(workload: str) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = sum(isinstance(p, ToolReturnPart) for m in messages if isinstance(m, ModelRequest) for p in m.parts)
        turn = scripted_turn(workload, returns)
        if isinstance(turn, str):
            return ModelResponse(parts=[TextPart(turn)])
        tool, args, call_id = turn
        return ModelResponse(parts=[ToolCallPart(tool, args, tool_call_id=call_id)])

    return FunctionModel(respond, model_name='scripted')


def build_agent(workload: str, persisted: bool) -> Agent[None, str]:
    return Agent(
        scripted_model(workload),
        name=agent_name(workload, persisted),
        tools=[get_weather],
        capabilities=[*([StepPersistence(store=STORE)] if persisted else []), TemporalDurability()],
    )


AGENTS = {
    agent_name(workload, persisted): build_agent(workload, persisted)
    for workload in ARGS.workloads
    for persisted in (False, True)
}


@dataclass(frozen=True)
class RunInput:
    agent: str
    prompt: str
    conversation_id: str


@workflow.defn(name='bench.ReferenceRun')
class ReferenceRun(PydanticAIWorkflow):
    """One agent run for one prompt: what a 2.62 user writes around a durable agent."""

    __pydantic_ai_agents__: Sequence[AbstractAgent[Any, Any]] = tuple(AGENTS.values())

    @workflow.run
    async def run(self, input: RunInput) -> str:
        result = await AGENTS[input.agent].run(input.prompt, conversation_id=input.conversation_id)
        return result.output


async def measure(client: Client, agent: str, task_queue: str) -> tuple[str, dict[str, int]]:
    """Run the agent once; returns the conversation id and what the run cost."""
    workflow_id = f'bench-reference-{agent}-{uuid.uuid4()}'
    await client.execute_workflow(
        ReferenceRun.run,
        RunInput(agent, TEMPORAL_PROMPT, workflow_id),
        id=workflow_id,
        task_queue=task_queue,
        task_timeout=WORKFLOW_TASK_TIMEOUT,
    )
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return workflow_id, history_cost(history.events)


async def stored_messages(conversation_id: str) -> int:
    """Messages in the conversation's latest snapshot: proof that the persistence activities wrote."""
    runs = await STORE.list_runs(conversation_id=conversation_id)
    snapshot = await STORE.latest_snapshot(run_id=runs[-1].run_id) if runs else None
    return 0 if snapshot is None else len(snapshot.messages)


async def main() -> None:
    client = await Client.connect(ARGS.address, plugins=[PydanticAIPlugin()])
    task_queue = f'bench-reference-{uuid.uuid4()}'
    results: dict[str, dict[str, dict[str, int]]] = {}
    async with Worker(client, task_queue=task_queue, workflows=[ReferenceRun]):
        for workload in ARGS.workloads:
            for persisted in (False, True):
                conversation_id, cost = await measure(client, agent_name(workload, persisted), task_queue)
                cost['stored_messages'] = await stored_messages(conversation_id)
                results.setdefault(workload, {})['persisted' if persisted else 'none'] = cost
    write_result_and_exit(ARGS.out, workloads=results)


if __name__ == '__main__':
    asyncio.run(main())
