"""The capability that makes a conversation durable in the store and recallable by the model.

Under `TemporalDurability` the hooks below run in workflow code, where nothing may touch the store.
They decide *what* to write (see `_delta`) and hand it to a durable operation, which pydantic-ai
runs as a Temporal activity named `agent__{agent}__capability__{id}__store_step`; the activity
does the write. On a plain `agent.run` the same operation runs in-process, so both paths store the
same messages.

Step boundaries: after each model response, after each batch of tool results, and at the end of
the run (only when the run added something the earlier boundaries did not see, such as an output
tool's return). Each write carries only what the store lacks, and an idempotency key made of the
workflow id, the agent run id and the boundary's sequence number, all of which replay identically.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai._agent_graph import CallToolsNode, ModelRequestNode
from pydantic_ai.capabilities import AbstractCapability, durable_operation
from pydantic_ai.messages import ModelMessage
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tools import AgentDepsT, Tool
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset
from pydantic_ai.usage import RunUsage
from temporalio import workflow
from temporalio.exceptions import ApplicationError

from ._delta import Delta, DeltaTracker
from ._metrics import record_search, record_step_write
from ._store_provider import StoreProvider, store_for
from .errors import (
    HistoryMismatch,
    InvalidQuery,
    InvalidSearchParameters,
    RecallError,
    StoreUnavailable,
    UnknownConversation,
)
from .models import RecallDeps, SearchRequest, StepDelta, StepWritten
from .search._documents import RECALL_TOOL_NAME

__all__ = ('ConversationRecall', 'ScopeResolver')

ScopeResolver = Callable[[RunContext[Any]], 'str | None']
"""Reads the tenant scope from trusted run state (usually `ctx.deps`), never from model output."""

SEARCH_TOOL_NAME = RECALL_TOOL_NAME


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
        max_payload_bytes: Largest write sent through one activity input. Bigger deltas are split;
            a single message bigger than this fails the run with a non-retryable `PayloadTooLarge`
            (Temporal's default blob limit is 2 MB, and an oversized input would otherwise make the
            workflow task fail and retry forever).
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
        max_payload_bytes: int = 2_000_000,
    ) -> None:
        self.id = id
        self.max_payload_bytes = max_payload_bytes
        self.store = None if store is None else StoreProvider.coerce(store)
        self._scope = scope
        self.search_limit = search_limit
        self.context_lines = context_lines
        self._tracker = DeltaTracker()
        self._sequence = 0
        self._usage_reported = RunUsage()
        # Built once: TemporalDurability registers a toolset's activity when the agent is built and
        # rejects a toolset that appears only at run time.
        self._toolset: FunctionToolset[AgentDepsT] | None = (
            FunctionToolset(
                [Tool(self._search_tool, name=SEARCH_TOOL_NAME, takes_ctx=True)],
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
        return run

    def scope_of(self, ctx: RunContext[Any]) -> str | None:
        scope = self._scope
        if scope is None:
            return ctx.deps.scope if isinstance(ctx.deps, RecallDeps) else None
        return scope(ctx) if callable(scope) else scope

    # --- step boundaries (workflow side under Temporal) ------------------------------------------

    async def before_run(self, ctx: RunContext[AgentDepsT]) -> None:
        # The history a run starts from normally came from the store; assume so, and let the first
        # write prove it (the store refuses a delta that does not attach, and we resend in full).
        self._tracker.assume_stored(ctx.messages)

    async def after_node_run(self, ctx: RunContext[AgentDepsT], *, node: Any, result: Any) -> Any:
        if isinstance(node, ModelRequestNode):
            await self._store_boundary(ctx, ctx.messages)
        elif isinstance(node, CallToolsNode) and isinstance(result, ModelRequestNode):
            # Tool returns ride on the next request, which joins ctx.messages only when it is sent.
            await self._store_boundary(ctx, [*ctx.messages, result.request])
        return result

    async def after_run(self, ctx: RunContext[AgentDepsT], *, result: AgentRunResult[Any]) -> AgentRunResult[Any]:
        # Most runs end on a model response the last boundary already stored; this writes only when
        # the run's end added messages (an output tool's return, for instance).
        await self._store_boundary(ctx, result.all_messages())
        return result

    async def _store_boundary(self, ctx: RunContext[AgentDepsT], history: Sequence[ModelMessage]) -> None:
        delta = self._tracker.pending(history)
        if delta is None:
            return
        if not await self._write(ctx, delta):
            await self._write(ctx, self._tracker.full(history))
        self._tracker.assume_stored(history)

    async def _write(self, ctx: RunContext[AgentDepsT], delta: Delta) -> bool:
        """Write `delta` in payload-sized pieces; `False` when the store could not attach it."""
        for piece in self._tracker.split(delta, self.max_payload_bytes):
            if len(piece.messages) == 1 and self._tracker.size_of(piece.messages[0]) > self.max_payload_bytes:
                size = self._tracker.size_of(piece.messages[0])
                # Scheduling an activity with an oversized input fails the workflow task, which
                # Temporal retries forever; fail the run instead, saying why and what to change.
                raise ApplicationError(
                    f'A {type(piece.messages[0]).__name__} of {size:,} bytes is too large to persist through one '
                    f'Temporal payload (limit {self.max_payload_bytes:,} bytes). Return a reference (a URL or a key '
                    'your application resolves) from the tool instead of the content itself.',
                    type='PayloadTooLarge',
                    non_retryable=True,
                )
            written = await self.store_step(ctx, self._step(ctx, piece))
            if not written.attached:
                return False
        return True

    def _step(self, ctx: RunContext[AgentDepsT], delta: Delta) -> StepDelta:
        self._sequence += 1
        conversation_id = ctx.conversation_id
        if not conversation_id:
            raise RecallError('The run has no conversation_id; pass `conversation_id=` to `agent.run`.')
        origin = workflow.info().workflow_id if workflow.in_workflow() else 'local'
        return StepDelta(
            conversation_id=conversation_id,
            scope=self.scope_of(ctx),
            idempotency_key=f'{origin}/{ctx.run_id}/{self._sequence}',
            base_length=delta.base_length,
            base_hash=delta.base_hash,
            messages=delta.messages,
            run_id=ctx.run_id,
            # The usage since the previous boundary: the store adds it once per idempotency key,
            # so a retried or replayed write cannot count it twice.
            usage=self._usage_increase(ctx.usage),
        )

    def _usage_increase(self, current: RunUsage) -> RunUsage:
        increase = current - self._usage_reported
        self._usage_reported = copy.deepcopy(current)
        return increase

    # --- the write (an activity under Temporal) ----------------------------------------------------

    @durable_operation(name='store_step')
    async def store_step(self, ctx: RunContext[Any], step: StepDelta) -> StepWritten:
        """Append one boundary's messages to the store, exactly once per idempotency key."""
        from .store._protocol import AppendRequest

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
        )
        try:
            result = await store.append(request)
            record_step_write(result.stored)
        except HistoryMismatch:
            return StepWritten(attached=False)
        except StoreUnavailable:
            raise  # retried by Temporal with backoff
        except RecallError as error:
            # Deterministic: another attempt would fail the same way.
            raise ApplicationError(str(error), type=type(error).__name__, non_retryable=True) from error
        return StepWritten(
            attached=True,
            head_id=result.head_id,
            length=result.length,
            stored=result.stored,
            replayed=result.replayed,
        )

    # --- the model's recall tool (an activity under Temporal) ---------------------------------------

    async def _search_tool(self, ctx: RunContext[Any], query: str, run_id: str | None = None) -> str:
        """Search everything said earlier in this conversation, including turns no longer in view.

        Args:
            query: Words to look for, e.g. an order number, a name or a file path.
            run_id: Only search messages from this earlier run of the conversation.
        """
        from ._recall import search_history
        from .search import render_for_model

        conversation_id = ctx.conversation_id
        if not conversation_id:
            return 'Search is unavailable: this run has no conversation id, so there is no history to search.'
        request = SearchRequest(
            query=query,
            conversation_id=conversation_id,
            scope=self.scope_of(ctx),
            run_id=run_id,
            exclude_run_id=ctx.run_id,
            limit=self.search_limit,
            context_lines=self.context_lines,
        )
        store = await store_for(self.store)
        started = time.perf_counter()
        try:
            result = await search_history(store, request)
            record_search(time.perf_counter() - started, len(result.hits))
        except UnknownConversation:
            return 'No earlier messages are stored for this conversation yet.'
        except (InvalidQuery, InvalidSearchParameters) as error:
            return f'Search refused: {error}'
        return render_for_model(result)
