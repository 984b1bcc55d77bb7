"""Our side of the Temporal rows: the scripted workloads through `RunPromptWorkflow`, with and without recall.

Runs in the project's own virtualenv against the dev server the driver started. Each workload runs
on one worker (its own task queue) with the same agent in three configurations: without
`ConversationRecall` (`none`), with it but without its recall tool (`persisted`: persistence alone,
as the reference's `StepPersistence` adds no tool), and with both (`recall_tool`: what the model's
search tool adds, its definition riding every model request). The workflow is the one we ship,
with `continue_history=False` so it schedules no history load: every activity in the history is a
model request, a tool call or a persistence write. The agents are defined here, not in a workflow
module: `RunPromptWorkflow` finds them in the worker's registry, which its module imports through
`imports_passed_through()`.

    .venv/bin/python bench/_temporal_ours.py HOST:PORT OUT.json [--workloads three_step,tool_loop_45]
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from typing import Any

from _sidekit import (
    OUTPUT_TOOL_ARGS,
    TEMPORAL_PROMPT,
    WORKFLOW_TASK_TIMEOUT,
    agent_name,
    get_weather,
    history_cost,
    parse_temporal_args,
    scripted_turn,
    write_result_and_exit,
)
from pydantic import BaseModel
from pydantic_ai import Agent, ToolOutput
from pydantic_ai.durable_exec.temporal import TemporalDurability
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from temporalio.client import Client

from temporal_recall import ConversationRecall, RecallDeps, RunPromptInput, RunPromptWorkflow
from temporal_recall.store import open_store
from temporal_recall.testing import connect, running_worker


def scripted_model(workload: str) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = sum(isinstance(p, ToolReturnPart) for m in messages if isinstance(m, ModelRequest) for p in m.parts)
        turn = scripted_turn(workload, returns)
        if isinstance(turn, str):
            return ModelResponse(parts=[TextPart(turn)])
        tool, args, call_id = turn
        return ModelResponse(parts=[ToolCallPart(tool, args, tool_call_id=call_id)])

    return FunctionModel(respond, model_name='scripted')


class Forecast(BaseModel):
    city: str
    sky: str


assert set(Forecast.model_fields) == set(OUTPUT_TOOL_ARGS)

CONFIGS = {'none': 'none', 'persisted': 'with', 'recall_tool': 'tool'}
"""Result key -> the agent-name suffix (`_sidekit.agent_name`)."""


def build_agent(workload: str, config: str) -> Agent[RecallDeps, Any]:
    recall = {'none': [], 'persisted': [ConversationRecall(search_tool=False)], 'recall_tool': [ConversationRecall()]}
    return Agent(
        scripted_model(workload),
        name=agent_name(workload, CONFIGS[config]),
        deps_type=RecallDeps,
        tools=[get_weather],
        output_type=ToolOutput(Forecast) if workload == 'output_tool' else str,
        capabilities=[*recall[config], TemporalDurability()],
    )


async def measure(client: Client, agent: Agent[RecallDeps, Any], task_queue: str) -> tuple[str, dict[str, int]]:
    """Run the agent once through `RunPromptWorkflow`; returns the conversation id and what the run cost."""
    workflow_id = f'bench-ours-{agent.name}-{uuid.uuid4()}'
    await client.execute_workflow(
        RunPromptWorkflow.run,
        RunPromptInput(prompt=TEMPORAL_PROMPT, conversation_id=workflow_id, agent=agent.name, continue_history=False),
        id=workflow_id,
        task_queue=task_queue,
        task_timeout=WORKFLOW_TASK_TIMEOUT,
    )
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return workflow_id, history_cost(history.events)


async def stored_messages(url: str, conversation_id: str) -> int:
    """How many messages the store holds for the conversation: proof that the persistence activities wrote."""
    store = await open_store(url)
    try:
        record = await store.read_record(conversation_id)
        return 0 if record is None else len(await store.read_history(record.head_id))
    finally:
        await store.close()


async def main() -> None:
    args = parse_temporal_args()
    agents = {(w, config): build_agent(w, config) for w in args.workloads for config in CONFIGS}
    results: dict[str, dict[str, dict[str, int]]] = {}
    with tempfile.TemporaryDirectory(prefix='bench-temporal-ours-') as tmp:
        url = f'sqlite:///{tmp}/recall.db'
        client = await connect(args.address)
        async with running_worker(client, agents=list(agents.values()), store=url) as worker:
            for (workload, config), agent in agents.items():
                conversation_id, cost = await measure(client, agent, worker.task_queue)
                cost['stored_messages'] = await stored_messages(url, conversation_id)
                results.setdefault(workload, {})[config] = cost
    write_result_and_exit(args.out, workloads=results)


if __name__ == '__main__':
    asyncio.run(main())
