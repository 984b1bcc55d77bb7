"""`RecallPlugin`: temporal-recall on a Temporal worker, the way Temporal integrations ship.

Add it to a worker (`Worker(..., plugins=[RecallPlugin(...)])`) or to the client its workers are
built from. It registers the search and load-history activities, the shipped workflows and the
agents' activities (through pydantic-ai's `AgentPlugin`), opens the store when the worker starts,
and closes it when the last worker using the plugin stops. It sets no data converter: put
`PydanticAIPlugin()` (and `message_codec_plugin(...)`, if wanted) on the client beside it.

How activities find the store, without any process-wide state:

- `temporal_recall.search` and `temporal_recall.load_history` are methods of a `RecallActivities`
  bound to this plugin's store (activity-instance binding, as Temporal's samples do).
- The capability's `store_step` and its recall tool are pydantic-ai activities, methods of the
  agent's module-level capability, which every worker in the process shares, so they cannot be
  bound to one worker's store. The plugin installs an activity interceptor that sets the worker's
  store in a `ContextVar` around each activity it executes; the capability reads it there. A
  `ContextVar` set in the activity's task ends with it, so two workers with different stores in
  one process each write to their own (`tests/worker/test_plugin.py`). The interceptor was chosen
  over `run_context` because it states the binding at the one place an activity starts, instead
  of relying on the SDK creating activity tasks inside the worker's run context.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from pydantic_ai.agent.abstract import AbstractAgent
from pydantic_ai.durable_exec.temporal import AgentPlugin, PydanticAIPlugin
from pydantic_ai.embeddings import Embedder
from temporalio.plugin import SimplePlugin
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
    Replayer,
    ReplayerConfig,
    Worker,
    WorkerConfig,
)

from .._store_provider import _WORKER_STORE, StoreProvider
from ..activities import RecallActivities
from ..codec._codec import codec_required
from ..embeddings._source import _WORKER_EMBEDDER, EmbedderSource, as_embedder
from ..errors import ConfigurationError, RecallError
from ..workflows import ConversationWorkflow, RunPromptWorkflow
from ..workflows._agents import check_agents, register_agents, unregister_agents

__all__ = ('SHIPPED_WORKFLOWS', 'RecallPlugin')

SHIPPED_WORKFLOWS: tuple[type, ...] = (RunPromptWorkflow, ConversationWorkflow)

log = logging.getLogger('temporal_recall.worker')


class _WorkerStore(Interceptor):
    def __init__(self, store: StoreProvider, embedder: Embedder | None) -> None:
        self.store = store
        self.embedder = embedder

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _BindStore(next, self.store, self.embedder)


class _BindStore(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, store: StoreProvider, embedder: Embedder | None) -> None:
        super().__init__(next)
        self.store = store
        self.embedder = embedder

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        token = _WORKER_STORE.set(self.store)
        embedder = _WORKER_EMBEDDER.set(self.embedder)
        try:
            return await self.next.execute_activity(input)
        finally:
            _WORKER_EMBEDDER.reset(embedder)
            _WORKER_STORE.reset(token)


class RecallPlugin(SimplePlugin):
    """temporal-recall's activities, workflows and store on a Temporal worker.

    Args:
        store: The worker's store: a URL (`"sqlite:///recall.db"`, `"postgresql://…"`) or path,
            opened when the worker starts and closed when it stops; or an open store, which stays
            the caller's to close. Capabilities built without `store=` use it in their activities.
        agents: The agents the worker runs; each needs a `name` and `TemporalDurability`. Without
            any, a worker logs a warning naming `agents=` when it starts: its agents' activities
            (`agent__NAME__…`) would not be registered, and workflows running them would wait on
            them for ever. It is not refused, since a worker may serve only recall's activities to
            workflows of its own, and a `Replayer` takes its agents elsewhere.
        include_shipped_workflows: Register `RunPromptWorkflow` and `ConversationWorkflow`.
        embedder: Recall by meaning on this worker: a pydantic-ai `Embedder`, an `EmbeddingModel` or a
            model name (`temporal_recall.embeddings.LOCAL_MODEL` for the offline one). Capabilities built
            without `embedder=` embed their steps with it, and the search activity (workflow `recall()`)
            searches hybrid by default. Not needed for an agent whose `ConversationRecall` has one: the
            search activity embeds the searches of that agent's workflows (`ConversationWorkflow`'s
            `search` Update) with the agent's. Without any, recall is BM25 only, and a search asking for
            meaning embeds its query with the model the store's vectors were made with.
    """

    def __init__(
        self,
        store: str | os.PathLike[str] | StoreProvider | Any,
        *,
        agents: Sequence[AbstractAgent[Any, Any]] = (),
        include_shipped_workflows: bool = True,
        embedder: EmbedderSource | None = None,
    ) -> None:
        self.store = StoreProvider.coerce(store)
        self.embedder = as_embedder(embedder)
        self.agents = tuple(agents)
        self._agent_plugins = [AgentPlugin(agent) for agent in self.agents]
        self._running = 0
        super().__init__(  # pyright: ignore[reportUnknownMemberType]
            'temporal_recall.RecallPlugin',
            activities=RecallActivities(self.store, embedder=self.embedder, agents=self.agents).all(),
            workflows=SHIPPED_WORKFLOWS if include_shipped_workflows else None,
            interceptors=[_WorkerStore(self.store, self.embedder)],
        )

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        client = config.get('client')
        if client is not None and not any(isinstance(p, PydanticAIPlugin) for p in client.config().get('plugins', ())):
            raise ConfigurationError(
                'The Temporal client has no PydanticAIPlugin; connect it with '
                '`Client.connect(address, plugins=[PydanticAIPlugin()])`.'
            )
        check_agents(self.agents)  # Registered for the task queue while the worker runs (`run_worker`).
        config = super().configure_worker(config)
        for plugin in self._agent_plugins:
            config = plugin.configure_worker(config)
        return config

    def configure_replayer(self, config: ReplayerConfig) -> ReplayerConfig:
        register_agents(self.agents, task_queue=None)
        config = super().configure_replayer(config)
        # A codec history replayed without message_codec_plugin then fails naming it, not with a KeyError.
        config['data_converter'] = codec_required(config.get('data_converter'))
        for plugin in self._agent_plugins:
            config = plugin.configure_replayer(config)
        return config

    async def run_worker(self, worker: Worker, next: Callable[[Worker], Awaitable[None]]) -> None:
        if not self.agents:
            log.warning(
                'RecallPlugin on task queue %r has no agents: it registers no agent activities (agent__NAME__...), '
                'so a workflow that runs an agent here waits for ever. Pass agents=[...] to RecallPlugin (or '
                "build_worker), unless this worker serves only recall's own activities.",
                worker.task_queue,
            )
        register_agents(self.agents, task_queue=worker.task_queue)
        try:
            if self._running == 0:
                await self._open()
            self._running += 1
        except BaseException:
            unregister_agents(task_queue=worker.task_queue)
            raise
        try:
            run = next
            for plugin in reversed(self._agent_plugins):
                run = _chained(plugin, run)
            await run(worker)
        finally:
            unregister_agents(task_queue=worker.task_queue)
            self._running -= 1
            if self._running == 0:
                await self.store.aclose()

    async def _open(self) -> None:
        """Open the store before polling: a store that does not work at start stops the worker at once.

        A worker that polled without its store would take tasks it can only fail, and an operator
        who mistyped a port or a host would see workflows stall, not a wrong setting. So any store
        error raises here (an unreachable server, no such database, not a store, a missing folder),
        with the store's one-line message naming where it looked and what to check, and without the
        driver's exception chained to it. Once the worker runs, an outage is different: activities
        fail with `StoreUnavailable` and Temporal retries them until the store answers again.
        """
        try:
            await self.store.get()
        except RecallError as error:
            raise error.with_traceback(None) from None

    def run_replayer(
        self,
        replayer: Replayer,
        histories: Any,
        next: Callable[[Replayer, Any], Any],
    ) -> Any:
        # Replay runs workflow code only; activity results come from history, so no store is opened.
        return next(replayer, histories)


def _chained(plugin: AgentPlugin, next: Callable[[Worker], Awaitable[None]]) -> Callable[[Worker], Awaitable[None]]:
    return lambda worker: plugin.run_worker(worker, next)
