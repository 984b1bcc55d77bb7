"""The step writer: one model request's new messages and its response, written from inside the request.

A step is written after its last complete response (the attach point), keyed by workflow id,
workflow run id and activity id, and fenced by the activity's attempt so a cut-off worker cannot
move the head back. The first attempt writes the request's new messages with the response in one
write; a retried one writes the messages under the same key again (stored and counted once) and
its response under a key of its own. A response the store refuses is left to the workflow side.
More in docs/design/store.md ("The step write").
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolReturnPart
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.usage import RunUsage
from temporalio import activity

from .._store_provider import store_for
from .._tracing import traced_append
from ..content import content_hash, resent_hash
from ..embeddings._index import embedded_append
from ..embeddings._source import embedder_for
from ..errors import EmbeddingUnavailable, HistoryMismatch, RecallError, StoreUnavailable
from ._activity_errors import raise_retryable, superseded_attempt
from ._marker import ViewCheck, view_digest

if TYPE_CHECKING:
    from pydantic_ai.embeddings import Embedder

    from .._store_provider import StoreProvider
    from ..models import HistoryWindow
    from ..search import SummaryRule
    from ..store.protocol import AppendRequest, AppendResult, Fence

__all__ = (
    'RESPONSE_WRITE_ATTEMPTS',
    'RESPONSE_WRITE_BACKOFF',
    'StepOwner',
    'StepWrite',
    'in_stored_conversation',
    'persistable',
    'prefix_kept_on_failure',
)

log = logging.getLogger('temporal_recall.capability')

RESPONSE_WRITE_ATTEMPTS = 4
"""How often the response write is tried inside the activity before the activity fails."""

RESPONSE_WRITE_BACKOFF = 0.5
"""Seconds before the second try; doubled before each further one."""


def persistable(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """The messages a store keeps: all but responses that are not final (suspended, interrupted, partial)."""
    return [m for m in messages if not (isinstance(m, ModelResponse) and m.state != 'complete')]


def in_stored_conversation(
    window: HistoryWindow | None, base_length: int, base_hash: str | None
) -> tuple[int, str | None]:
    """An attach point in the run's history as one in the stored conversation.

    A run whose history was loaded without its oldest turns (`RecallDeps.history_window`) counts
    from its first loaded message; the store counts from the conversation's first. Attaching at the
    run's start is attaching after the stored message the window follows.
    """
    if window is None:
        return base_length, base_hash
    return window.offset + base_length, base_hash if base_length else window.base_hash


class StepOwner(Protocol):
    """What a step write needs from the capability whose model makes the step (`ConversationRecall`).

    Written as a protocol so this module does not import the capability that imports it.
    """

    store: StoreProvider | None
    """`None`: the store of the worker running the activity (see `_store_provider.store_for`)."""
    embedder: Embedder | None
    """`None`: the worker's embedder, else the store's, if any (see `embeddings._source.embedder_for`)."""
    summary: SummaryRule | None

    def scope_of(self, ctx: RunContext[Any]) -> str | None: ...

    def window_of(self, ctx: RunContext[Any]) -> HistoryWindow | None: ...

    def note_stored_in_process(self, content_hash: str) -> None: ...

    def record_write(self, result: AppendResult) -> None: ...


@asynccontextmanager
async def prefix_kept_on_failure(step: StepWrite | None) -> AsyncGenerator[None]:
    """Store the request's new messages when the model call fails (or is cancelled) inside the block.

    They are otherwise written with the response, in one write: a prompt the model never answered
    (or the tool results it was sent) is still what the conversation said, and a chat turn retried
    after the failure attaches to it (`store/log/_pending.py`). The model's error is what the caller
    sees; a store that fails too is logged, since the activity fails (and Temporal retries it) anyway.
    """
    try:
        yield
    except BaseException as error:
        if step is not None and isinstance(error, Exception | asyncio.CancelledError):
            try:
                # Shielded: a cancelled activity still keeps what it was sent.
                await asyncio.shield(step.write_prefix())
            except Exception as failure:  # Reported; the model's error is what the caller sees.
                log.warning('The messages of a failed model request were not stored: %s', failure)
        raise


@dataclass
class StepWrite:
    """One model request's write: its new messages after the attach point (`base`), then its response."""

    capability: StepOwner
    conversation_id: str
    scope: str | None
    run_id: str | None
    unit: str
    fence: Fence | None
    attempt: int
    view: list[ModelMessage]
    base: int
    function_tools: frozenset[str]
    window: HistoryWindow | None = None

    @classmethod
    def start(
        cls,
        capability: StepOwner,
        ctx: RunContext[Any],
        view: list[ModelMessage],
        parameters: ModelRequestParameters,
    ) -> StepWrite:
        from ..store.protocol import Fence

        conversation_id = ctx.conversation_id
        if not conversation_id:
            raise RecallError('The run has no conversation_id; pass `conversation_id=` to `agent.run`.')
        if activity.in_activity():
            info = activity.info()
            unit = f'{info.workflow_id}/{info.workflow_run_id}/{info.activity_id}'
            fence: Fence | None = Fence(key=unit, attempt=info.attempt)
            attempt = info.attempt
        else:
            # In-process, attempts run one after another and nothing outlives the run: a fresh key per request.
            unit = f'local/{ctx.run_id}/{ctx.run_step}/{uuid.uuid4().hex[:12]}'
            fence, attempt = None, 1
        base = 0
        for index in range(len(view) - 1, -1, -1):
            if isinstance(view[index], ModelResponse):
                base = index + 1
                break
        return cls(
            capability=capability,
            conversation_id=conversation_id,
            scope=capability.scope_of(ctx),
            run_id=ctx.run_id,
            unit=unit,
            fence=fence,
            attempt=attempt,
            view=view,
            base=base,
            function_tools=frozenset(tool.name for tool in parameters.function_tools),
            window=capability.window_of(ctx),
        )

    def stamped(self, response: ModelResponse) -> ModelResponse:
        """A copy of `response` with the run's ids where the model left them unset, as pydantic-ai fills them in.

        A copy: the response the activity returns stays as it was, so the workflow's history does not grow.
        """
        return replace(
            response,
            run_id=response.run_id or self.run_id,
            conversation_id=response.conversation_id or self.conversation_id,
        )

    @cached_property
    def _written_hashes(self) -> list[str]:
        """The content hashes of the attach point's message and the messages written after it, computed
        once: the write's base hash, the marker's digest and the store's rows are all made of them."""
        return [content_hash(message) for message in self.view[max(self.base - 1, 0) :]]

    @property
    def _new_hashes(self) -> list[str]:
        """The content hashes of the request's new messages (`view[base:]`), from `_written_hashes`."""
        return self._written_hashes[1:] if self.base else self._written_hashes

    @property
    def digest(self) -> ViewCheck:
        """What this step's response is stored after: the attach point's message and the messages written after it."""
        return ViewCheck(length=len(self.view), start=max(self.base - 1, 0), digest=view_digest(self._written_hashes))

    def _request(
        self,
        key: str,
        messages: Sequence[ModelMessage],
        hashes: Sequence[str],
        usage: RunUsage | None,
        *,
        base: int | None = None,
    ) -> AppendRequest:
        """A write of `messages` (with their content `hashes`) after the request's last complete response
        (the attach point), or after the first `base` messages of the request (its own, for a response
        written alone)."""
        from ..store.protocol import AppendRequest

        base = self.base if base is None else base
        # `_written_hashes` begins at the attach point's message and runs to the request's last.
        known = self._written_hashes[base - 1 - max(self.base - 1, 0)] if base else None
        base_length, base_hash = in_stored_conversation(self.window, base, known)
        return AppendRequest(
            conversation_id=self.conversation_id,
            scope=self.scope,
            idempotency_key=f'{self.unit}/{key}',
            base_length=base_length,
            base_hash=base_hash,
            messages=messages,
            run_id=self.run_id,
            usage=usage,
            fence=self.fence,
            summary=self.capability.summary,
            # A chat UI that keeps its own history sends back earlier turns without some fields.
            base_resent_hash=resent_hash(self.view[base - 1]) if base else None,
            content_hashes=hashes,
        )

    def _tool_usage(self) -> RunUsage | None:
        """The function-tool calls whose returns the request's new messages carry, counted where they are stored."""
        calls = sum(
            1
            for message in self.view[self.base :]
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, ToolReturnPart) and part.tool_name in self.function_tools
        )
        return RunUsage(tool_calls=calls) if calls else None

    async def write_prefix(self) -> None:
        """Store the request's new messages alone (the model gave no final response); one that does not
        attach is left to the workflow side, which writes the run's history at its next boundary."""
        try:
            await self._append_prefix()
        except HistoryMismatch:
            return
        except (StoreUnavailable, EmbeddingUnavailable) as error:
            raise_retryable(error)

    async def _append_prefix(self) -> None:
        """The request's new messages, with the usage of the tool calls they carry the results of, under
        the activity's own key."""
        new = self.view[self.base :]
        if new:
            await self._append(self._request('prefix', new, self._new_hashes, self._tool_usage()), write='prefix')

    async def write_step(self, response: ModelResponse) -> str | None:
        """Store the request's new messages and the response (retrying a failed write): the response's
        content hash, or `None` when the store refused it (the workflow side writes the step).

        The first attempt writes both in one write, under the activity's own key (`prefix`): each write
        is a transaction with its own fixed cost (the conversation's row, its head, the fence, the
        record of the key). A retried attempt writes the messages under that key again, which an earlier attempt may
        have applied already (then it stores nothing and counts nothing), and its response under a
        key of its own: each attempt's model request is counted, the tool calls whose results it
        carried once.
        """
        usage = RunUsage(requests=1)
        usage.incr(response.usage)
        # Hashed once: the store files the response under it, and the marker carries it.
        stored_hash = content_hash(response)
        if self.attempt == 1:
            tools = self._tool_usage()
            if tools is not None:
                usage.incr(tools)
            messages = [*self.view[self.base :], response]
            request = self._request('prefix', messages, [*self._new_hashes, stored_hash], usage)
        else:
            base = len(self.view)
            request = self._request(f'{self.attempt}/response', [response], [stored_hash], usage, base=base)
        delay = RESPONSE_WRITE_BACKOFF
        for remaining in range(RESPONSE_WRITE_ATTEMPTS - 1, -1, -1):
            try:
                if self.attempt > 1:
                    await self._append_prefix()
                await self._append(request, write='response')
            except HistoryMismatch:
                return None
            except (StoreUnavailable, EmbeddingUnavailable) as error:
                if not remaining:
                    raise_retryable(error)
                await asyncio.sleep(delay)
                delay *= 2
                continue
            if not activity.in_activity():
                # In-process the capability's hooks may read the response before a stream is closed
                # (and marked): tell the run's capability directly.
                self.capability.note_stored_in_process(stored_hash)
            return stored_hash
        raise AssertionError('unreachable')  # pragma: no cover

    async def _append(self, request: AppendRequest, *, write: str) -> AppendResult:
        store = await store_for(self.capability.store)
        embedder = embedder_for(self.capability.embedder, store)
        result = await embedded_append(store, embedder, request, lambda: traced_append(store, request, write=write))
        if result.fenced:
            raise superseded_attempt(self.attempt, self.unit)
        self.capability.record_write(result)
        return result
