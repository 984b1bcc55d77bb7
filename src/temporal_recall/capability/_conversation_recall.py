"""The capability that makes a conversation durable in the store and recallable by the model.

Most steps are written inside their own model-request activity, by the `PersistingModel` that
`get_wrapper_model` returns (`_step_write`), at no Temporal cost of their own. From workflow code,
through the durable operation `store_step` (a pinned activity name), the capability writes only
what no model request saw, and every boundary of a workflow whose history predates in-activity
writes. Its decisions are made from the activity results in the workflow's history (the marker a
stored response carries), so they replay identically. More in docs/design/store.md ("The step write").
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pydantic_ai import CallToolsNode, ModelRequestNode, RunContext
from pydantic_ai.agent.abstract import AbstractAgent
from pydantic_ai.capabilities import AbstractCapability, durable_operation
from pydantic_ai.embeddings import Embedder
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model, ModelRequestContext
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tools import AgentDepsT, Tool
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset
from pydantic_ai.usage import RunUsage
from temporalio import workflow
from temporalio.exceptions import ApplicationError

from .._metrics import record_step_write
from .._store_provider import StoreProvider, store_for
from .._tracing import traced_append
from ..content import form_1_hashes
from ..embeddings._index import embedded_append
from ..embeddings._source import EmbedderSource, as_embedder, embedder_for
from ..errors import (
    EmbeddingMismatch,
    EmbeddingUnavailable,
    HistoryMismatch,
    InvalidIdentifier,
    InvalidQuery,
    InvalidSearchParameters,
    RecallError,
    StoreUnavailable,
    UnknownConversation,
)
from ..models import HistoryWindow, RecallDeps, SearchRequest, StepDelta, StepWritten
from ..search import Role, SearchMode, SummaryRule
from ..text._documents import RECALL_TOOL_NAME
from ._activity_errors import failing_for_good, raise_retryable
from ._delta import Delta, DeltaTracker
from ._marker import Marker, take_marker
from ._persisting_model import PersistingModel
from ._repeated_prompts import without_repeated_prompts
from ._step_write import in_stored_conversation, persistable

if TYPE_CHECKING:
    from ..store.protocol import AppendResult

__all__ = ('ConversationRecall', 'ScopeResolver', 'agent_embedder')

ScopeResolver = Callable[[RunContext[Any]], 'str | None']
"""Reads the tenant scope from trusted run state (usually `ctx.deps`), never from model output."""

SEARCH_TOOL_NAME = RECALL_TOOL_NAME

SEARCH_TOOL_ACTIVITY: dict[str, Any] = {
    'start_to_close_timeout': timedelta(seconds=30),
    'heartbeat_timeout': timedelta(seconds=10),
}
"""The recall tool's activities under `TemporalDurability` (its `metadata={'temporal': ...}`): a search, bounded as
the `temporal_recall.search` activity is. pydantic-ai heartbeats every tool activity, so a worker killed during a
search is noticed within the heartbeat timeout, not after the agent's start-to-close timeout (60 s by default).
`SetToolMetadata(tools=[SEARCH_TOOL_NAME], temporal=...)` on the agent replaces it."""


class ConversationRecall(AbstractCapability[AgentDepsT]):
    """Persist every step of a run to the conversation store, and let the model search it.

    Args:
        store: Where the conversation lives: a URL such as `"sqlite:///recall.db"` or
            `"postgresql://…"` (opened lazily, in activity code only), a `StoreProvider`, or an open
            store for plain runs outside Temporal. Default: the store of the worker the activity
            runs on (its `RecallPlugin`'s).
        id: Stable identity; part of the activity names
            (`agent__{agent}__capability__{id}__store_step`), so changing it breaks the replay of
            running workflows.
        scope: The tenant scope every write and search is confined to: a fixed string, or a
            function of the run context (typically reading `ctx.deps`). Never taken from the model.
            Default: `ctx.deps.scope` when the deps are a `RecallDeps` (what the shipped workflows
            pass), else no scope.
        search_tool: Whether the model gets the `search_conversation_history` tool.
        search_limit: How many hits the tool returns.
        context_lines: Neighbouring messages shown around each hit.
        summary: Your own rule for which messages are summaries (a pure function of the message),
            on top of the shapes recall knows (`CompactionPart` and pydantic-ai-harness's). A message
            it accepts is stored marked as a summary and never indexed, so a search finds the
            messages it summarises instead. It runs where the store is written (in the activity
            under Temporal).
        max_payload_bytes: Largest message a step may add. A `store_step` write bigger than this is
            split; a single message bigger than this (a tool's return, say, which the next model
            request would carry) fails the run with a non-retryable `PayloadTooLarge` (Temporal's
            default blob limit is 2 MB, and an oversized input would otherwise make the workflow
            task fail and retry forever).
        embedder: Recall by meaning as well as by words: a pydantic-ai `Embedder`, an `EmbeddingModel`
            or a model name (`'openai:text-embedding-3-small'`, or `temporal_recall.embeddings.LOCAL_MODEL`
            for the offline model of the `semantic` extra). Each step's documents are embedded where
            the step is written (in its model-request activity: no activity or history event of its
            own), and the recall tool searches BM25 and vectors together (`mode='hybrid'`). Default:
            the embedder of the worker's `RecallPlugin`, if it has one, else the one the store was opened
            with (`open_store(..., embedder=...)`); without any, recall is BM25 only. Under Temporal, the
            `search` Update of `ConversationWorkflow` running this agent embeds its query with it too.
    """

    def __init__(
        self,
        *,
        store: str | StoreProvider | Any | None = None,
        id: str = 'recall',
        scope: str | ScopeResolver | None = None,
        search_tool: bool = True,
        search_limit: int = 8,
        context_lines: int = 1,
        summary: SummaryRule | None = None,
        max_payload_bytes: int = 2_000_000,
        embedder: EmbedderSource | None = None,
    ) -> None:
        self.id = id
        self.embedder = as_embedder(embedder)
        self.max_payload_bytes = max_payload_bytes
        self.store = None if store is None else StoreProvider.coerce(store)
        self._scope = scope
        self.search_limit = search_limit
        self.context_lines = context_lines
        self.summary = summary
        self._tracker = DeltaTracker()
        self._sequence = 0
        self._usage_reported = RunUsage()
        self._stored_in_activity: dict[int, tuple[ModelResponse, Marker]] = {}
        self._stored_in_process: set[str] = set()
        self._in_activity = False
        self._wrapper_wrote = False
        self._latest: list[ModelMessage] = []
        # Built once: TemporalDurability registers a toolset's activity when the agent is built and
        # rejects a toolset that appears only at run time.
        self._toolset: FunctionToolset[AgentDepsT] | None = (
            FunctionToolset(
                [
                    Tool(
                        self._search_tool,
                        name=SEARCH_TOOL_NAME,
                        takes_ctx=True,
                        metadata={'temporal': dict(SEARCH_TOOL_ACTIVITY)},
                    )
                ],
                id=f'{id}-search',
            )
            if search_tool
            else None
        )

    # --- configuration -------------------------------------------------------------------------

    def get_toolset(self) -> AbstractToolset[AgentDepsT] | None:
        return self._toolset

    async def for_run(self, ctx: RunContext[AgentDepsT]) -> AbstractCapability[AgentDepsT]:
        # Per-run state (what was stored, the boundary counter) must not leak between runs that
        # share the module-level agent, including concurrent workflows on one worker.
        run = copy.copy(self)
        run._tracker = DeltaTracker()
        run._sequence = 0
        run._usage_reported = RunUsage()
        run._stored_in_activity = {}
        run._stored_in_process = set()
        run._in_activity = False
        run._wrapper_wrote = False
        run._latest = []
        return run

    def get_wrapper_model(self, model: Model) -> Model | None:
        # Called in the model-request activity on the agent's own capability, and per attempt in-process.
        return PersistingModel(model, self)

    def scope_of(self, ctx: RunContext[Any]) -> str | None:
        scope = self._scope
        if scope is None:
            return ctx.deps.scope if isinstance(ctx.deps, RecallDeps) else None
        return scope(ctx) if callable(scope) else scope

    def window_of(self, ctx: RunContext[Any]) -> HistoryWindow | None:
        """Where the run's history starts in the stored conversation (`RecallDeps.history_window`)."""
        return ctx.deps.history_window if isinstance(ctx.deps, RecallDeps) else None

    # --- step boundaries (workflow side under Temporal) ------------------------------------------

    async def before_run(self, ctx: RunContext[AgentDepsT]) -> None:
        # The history a run starts from normally came from the store; assume so, and let the first
        # write prove it (the store refuses a delta that does not attach, and we resend in full).
        self._tracker.assume_stored(persistable(ctx.messages))
        # A prompt left unanswered by a failed model call, said again by this run (a chat client's whole
        # history, a retried turn), is sent to the model once (`_repeated_prompts`). In place: the run reads this list.
        once = without_repeated_prompts(ctx.messages, ctx.prompt)
        if once is not None:
            ctx.messages[:] = once

    async def after_model_request(
        self, ctx: RunContext[AgentDepsT], *, request_context: ModelRequestContext, response: ModelResponse
    ) -> ModelResponse:
        # The marker comes back in the activity's result, so it replays; users never see it.
        marker = take_marker(response)
        if marker is not None:
            self._stored_in_activity[id(response)] = (response, marker)
        return response

    def note_stored_in_process(self, content_hash: str) -> None:
        """Called by this run's `PersistingModel` on a plain `agent.run`, where no activity result carries a marker."""
        self._stored_in_process.add(content_hash)

    def _stored_by_its_activity(self, history: Sequence[ModelMessage], index: int) -> bool:
        """Whether `history[index]` is a response its own model request stored, after the run's history as it holds it.

        The activity stored the request as the model saw it; where pydantic-ai merged or rendered
        messages for the model, that is not the run's history, and the workflow writes the boundary.
        """
        message = history[index]
        if not isinstance(message, ModelResponse):
            return False
        found = self._stored_in_activity.get(id(message))
        if found is not None and found[0] is message:
            return self._marker_matches(found[1], history, index)
        return self._tracker.hash_of(message) in self._stored_in_process

    def _marker_matches(self, marker: Marker, history: Sequence[ModelMessage], index: int) -> bool:
        """Whether the run holds `history[index]`, and what came before it, as its activity stored them.

        A marker of form 1 (recorded before content hashes were pinned to pydantic-ai 2.68's fields) was
        made under the release that recorded it: it is compared with the hashes form 1 gave there, so a
        workflow started before an upgrade of pydantic-ai or of this package decides as it did.
        """
        before = persistable(history[:index])
        view = marker.view
        if marker.form >= 2:
            if self._tracker.hash_of(history[index]) != marker.content_hash:
                return False
            return view is None or view.matches([self._tracker.hash_of(m) for m in before])
        own = form_1_hashes(history[index])
        if marker.content_hash not in own:
            return False
        if view is None:
            return True
        earlier = [form_1_hashes(m) for m in before]  # Hashed once, for whichever release made the marker.
        return any(
            own[variant] == marker.content_hash and view.matches([hashes[variant] for hashes in earlier])
            for variant in range(len(own))
        )

    def _absorb_stored_steps(self, history: Sequence[ModelMessage]) -> bool:
        """Note what the run's own model requests stored: everything up to the last response one of them wrote.

        Returns whether the history's last message is such a response.
        """
        for index in range(len(history) - 1, -1, -1):
            if self._stored_by_its_activity(history, index):
                self._in_activity = self._wrapper_wrote = True
                stored = persistable(history[: index + 1])
                # Never forget a later store_step write. Not by length: a run that merged requests the
                # store holds apart (`store/log/_pending.py`) holds fewer messages than the store.
                if self._tracker.pending(stored) is not None:
                    self._tracker.assume_stored(stored)
                return index == len(history) - 1
        return False

    async def after_node_run(self, ctx: RunContext[AgentDepsT], *, node: Any, result: Any) -> Any:
        if isinstance(node, ModelRequestNode):
            self._latest = list(ctx.messages)
            # When the response was stored by its own request (with the request's new messages), there
            # is nothing to write; otherwise (an older worker, a rewritten request) write the boundary.
            if not self._absorb_stored_steps(ctx.messages):
                self._in_activity = False
                await self._store_boundary(ctx, ctx.messages)
        elif isinstance(node, CallToolsNode) and isinstance(result, ModelRequestNode):
            # Tool returns ride on the next request, which joins ctx.messages only when it is sent.
            history = [*ctx.messages, result.request]
            self._latest = history
            if self._in_activity:
                # That request's own activity stores them; only make sure it will be able to carry them.
                self._check_sizes(self._tracker.pending(persistable(history)))
            else:
                await self._store_boundary(ctx, history)
        return result

    async def after_run(self, ctx: RunContext[AgentDepsT], *, result: AgentRunResult[Any]) -> AgentRunResult[Any]:
        # Most runs end on a model response already stored; this writes only when the run's end added
        # messages no model request carried (an output tool's return, for instance).
        history = result.all_messages()
        self._absorb_stored_steps(history)
        await self._store_boundary(ctx, history)
        return result

    async def on_run_error(self, ctx: RunContext[AgentDepsT], *, error: BaseException) -> AgentRunResult[Any]:
        # A run that fails after tool calls, before a model request carried their results, would lose
        # them. Only on the in-activity path: a workflow on the old path never wrote here, and replay
        # must schedule exactly what it recorded. Cancellation schedules nothing. The run's history is
        # gone from `ctx` by now: use the last one a boundary saw.
        if self._in_activity and isinstance(error, Exception) and self._latest:
            await self._store_boundary(ctx, self._latest)
        raise error

    async def _store_boundary(self, ctx: RunContext[AgentDepsT], history: Sequence[ModelMessage]) -> None:
        history = persistable(history)
        delta = self._tracker.pending(history)
        if delta is None:
            return
        if not await self._write(ctx, delta) and not await self._write(ctx, self._tracker.full(history)):
            # Only a history loaded without its oldest turns can miss here: the stored conversation
            # changed below its window (rewritten shorter, or deleted). Store it as a rewrite, a branch
            # the head moves to, rather than lose the run's messages.
            await self._write(ctx, self._tracker.full(history), windowed=False)
        self._tracker.assume_stored(history)

    def _check_sizes(self, delta: Delta | None) -> None:
        for message in delta.messages if delta is not None else ():
            size = self._tracker.size_of(message)
            if size > self.max_payload_bytes:
                # Scheduling an activity with an oversized input fails the workflow task, which
                # Temporal retries forever; fail the run instead, saying why and what to change.
                raise ApplicationError(
                    f'A {type(message).__name__} of {size:,} bytes is too large to persist through one '
                    f'Temporal payload (limit {self.max_payload_bytes:,} bytes). Return a reference (a URL or a key '
                    'your application resolves) from the tool instead of the content itself.',
                    type='PayloadTooLarge',
                    non_retryable=True,
                )

    async def _write(self, ctx: RunContext[AgentDepsT], delta: Delta, *, windowed: bool = True) -> bool:
        """Write `delta` in payload-sized pieces; `False` when the store could not attach it.

        `windowed=False` places it as if the run's history started the conversation, ignoring
        `RecallDeps.history_window`.
        """
        self._check_sizes(delta)
        for piece in self._tracker.split(delta, self.max_payload_bytes):
            written = await self.store_step(ctx, self._step(ctx, piece, windowed=windowed))
            if not written.attached:
                return False
        return True

    def _step(self, ctx: RunContext[AgentDepsT], delta: Delta, *, windowed: bool = True) -> StepDelta:
        self._sequence += 1
        conversation_id = ctx.conversation_id
        if not conversation_id:
            raise RecallError('The run has no conversation_id; pass `conversation_id=` to `agent.run`.')
        origin = workflow.info().workflow_id if workflow.in_workflow() else 'local'
        window = self.window_of(ctx) if windowed else None
        base_length, base_hash = in_stored_conversation(window, delta.base_length, delta.base_hash)
        return StepDelta(
            conversation_id=conversation_id,
            scope=self.scope_of(ctx),
            idempotency_key=f'{origin}/{ctx.run_id}/{self._sequence}',
            base_length=base_length,
            base_hash=base_hash,
            messages=delta.messages,
            run_id=ctx.run_id,
            # On the old path, the usage since the previous boundary: the store adds it once per
            # idempotency key, so a retried or replayed write cannot count it twice. Once a model
            # request of this run wrote its own step, each request adds its own usage there.
            usage=None if self._wrapper_wrote else self._usage_increase(ctx.usage),
        )

    def _usage_increase(self, current: RunUsage) -> RunUsage:
        increase = current - self._usage_reported
        self._usage_reported = copy.deepcopy(current)
        return increase

    # --- the write (an activity under Temporal) ----------------------------------------------------

    @durable_operation(name='store_step')
    async def store_step(self, ctx: RunContext[Any], step: StepDelta) -> StepWritten:
        """Append one boundary's messages to the store, exactly once per idempotency key."""
        from ..store.protocol import AppendRequest

        store = await store_for(self.store)
        request = AppendRequest(
            conversation_id=step.conversation_id,
            scope=step.scope,
            idempotency_key=step.idempotency_key,
            base_length=step.base_length,
            base_hash=step.base_hash,
            messages=step.messages,
            run_id=step.run_id,
            usage=step.usage,
            summary=self.summary,
        )
        with failing_for_good():  # the step write's rule: what another attempt would meet again fails for good
            try:
                embedder = embedder_for(self.embedder, store)
                result = await embedded_append(
                    store, embedder, request, lambda: traced_append(store, request, write='store_step')
                )
                self.record_write(result)
            except HistoryMismatch:
                return StepWritten(attached=False)
            except (StoreUnavailable, EmbeddingUnavailable) as error:
                raise_retryable(error)
        return StepWritten(
            attached=True,
            head_id=result.head_id,
            length=result.length,
            stored=result.stored,
            replayed=result.replayed,
        )

    def record_write(self, result: AppendResult) -> None:
        """Count a committed write in the worker's metrics (activity code only)."""
        record_step_write(result.stored)

    # --- the model's recall tool (an activity under Temporal) ---------------------------------------

    async def _search_tool(
        self,
        ctx: RunContext[Any],
        query: str,
        run_id: str | None = None,
        role: Role | None = None,
        mode: SearchMode | None = None,
    ) -> str:
        """Search everything said earlier in this conversation, including turns no longer in view.

        Args:
            query: Words to look for, e.g. an order number, a name or a file path, or what was meant.
            run_id: Only search messages from this earlier run of the conversation.
            role: Only messages said by 'user' (the person you talk to), 'assistant' (you: replies
                and tool calls), 'tool' (tool results) or 'system' (system prompts).
            mode: 'bm25' (the exact words), 'semantic' (the meaning, for a paraphrase) or 'hybrid'
                (both; the default when search by meaning is available).
        """
        from ..search import render_for_model
        from ..search.plan import search_index

        conversation_id = ctx.conversation_id
        if not conversation_id:
            return 'Search is unavailable: this run has no conversation id, so there is no history to search.'
        try:
            # The model chose `query`, `run_id` and `role`: a bad one is answered, not raised, so the tool's
            # activity never fails in a way Temporal would retry, and the model can correct itself.
            request = SearchRequest(
                query=query,
                conversation_id=conversation_id,
                scope=self.scope_of(ctx),
                run_id=run_id,
                exclude_run_id=ctx.run_id,
                limit=self.search_limit,
                context_lines=self.context_lines,
                role=role,
                mode=mode,
            )
            store = await store_for(self.store)
            result = await search_index(store, request, embedder=embedder_for(self.embedder, store))
        except UnknownConversation:
            return 'No earlier messages are stored for this conversation yet.'
        except (InvalidIdentifier, InvalidQuery, InvalidSearchParameters, EmbeddingMismatch) as error:
            return f'Search refused: {error}'
        return render_for_model(result)


def agent_embedder(agent: AbstractAgent[Any, Any]) -> Embedder | None:
    """The embedder `agent`'s `ConversationRecall` was given (`embedder=`), if any: the first one's, in the order
    the agent applies its capabilities. A worker's search activity embeds the agent's workflow searches with it."""
    found: list[Embedder] = []

    def visit(capability: AbstractCapability[Any]) -> None:
        if isinstance(capability, ConversationRecall) and capability.embedder is not None:
            found.append(capability.embedder)

    try:
        root = agent.root_capability
    except NotImplementedError:  # an agent type that does not expose its capabilities
        return None
    root.apply(visit)
    return found[0] if found else None
