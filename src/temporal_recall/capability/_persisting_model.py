"""The write at each step boundary, done by the model request itself: inside its Temporal activity.

pydantic-ai calls `ConversationRecall.get_wrapper_model` inside the model-request activity (and the
streaming one), on the agent's own capabilities, and in-process on a plain `agent.run`. The
`PersistingModel` it returns sees what no workflow-side hook can see without scheduling an activity
of its own: the request's full message list, the new response, the run context and
`temporalio.activity.info()`. So the step persists itself, at no extra Temporal cost:

1. After the model answered, in one write: the request's messages the store lacks (the prompt, the
   tool results of the previous step: every message after the request's last complete response),
   then the response, attached after that last response, with the usage of this one call. If the
   store does not hold that response where the request has it (a history processor rewrote the
   request, say), nothing is written here and the workflow side writes the boundary instead (see
   below). A failed write is retried here a few times with backoff before the activity fails;
   when it does fail, Temporal retries the activity and the model is called again.
2. When the model call fails, is cancelled, or gives no final response, the request's new messages
   are written alone, so a prompt nobody answered is still stored.
3. The response then carries a marker in `metadata` (`MARKER_KEY`, with the content hash stored),
   which the capability's workflow-side hook removes again before pydantic-ai records the response.
   The marker is part of the activity's result, so it is in the workflow's history: replay sees the
   same marker, and a history recorded before this module existed has none, so its workflow takes
   the old path (a `store_step` activity per boundary) and replays unchanged, with no patch marker.

The messages a step writes are the run's own history, not what the model is sent: pydantic-ai merges
consecutive requests into one before the model sees them, and a model without inline system prompts
gets a mid-history system prompt as `<system>` user text. On a plain `agent.run` the run context
holds the run's history (`ctx.messages`), and the step stores that. Inside an activity the run
context does not carry the messages, so the step stores what the model was sent, and the marker says
what that was (`ViewCheck`): where it differs from the run's history, the workflow side writes the
boundary through `store_step`. Where they differ only by requests merged into one, the store reads
both as the same messages (`store/log/_pending.py`) and keeps what the activity wrote; otherwise its
head then follows the run, and the activity's write is a branch it left behind. Steps whose new
messages are unchanged by that preparation cost nothing extra.

Keys and retries. Writes are keyed by workflow id, workflow run id and activity id. The first
attempt writes the request's new messages and its response under the activity's key (`prefix`),
as does a failed call's write of the messages alone. A retried attempt writes the messages under
that key again (stored and counted once, whichever attempt got there first) and then its response
under a key of its own attempt, after the request: each attempt's model request is counted in the
conversation's usage, the tool calls whose results the request carried once, and a retry that
answered differently becomes the head, the earlier answer a branch the head left behind (which the
store records as superseded). Every write carries a `Fence` (the activity's identity
and attempt): the store refuses writes from an attempt lower than one it has seen, so a cut-off
worker that is still running cannot move the head back. Such an attempt fails with a retryable
`SupersededAttempt` (Temporal has already discarded it).

A response that is not `complete` (suspended by `pause_turn`, a background job, interrupted or
partial) is never written (only the request's new messages are); the request that continues it is
written with its own response.

The model id. pydantic-ai stamps `model_id` onto a response in workflow code after the activity
returned, unless the response already has one. This wrapper stamps it first (the wrapped model's
`model_id`), so the copy it stores and the copy the workflow keeps hash alike. Under a
`resolve_model_id` alias that means the response records the resolved model's id rather than the
alias. A streamed response cannot be stamped (the run rebuilds it from the stream), so the stored
copy gets the same id and the workflow side checks the hash: a response whose workflow copy hashes
differently (a different model id, a workspace reference) is written again from the workflow.
The run's `run_id` and `conversation_id` are stamped on the stored copy only, as pydantic-ai fills
them in after the request (a value the model set is kept): the stored response is the run's own,
and the activity's result, in the workflow's history, is unchanged.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import uuid
from collections.abc import AsyncGenerator, Generator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolReturnPart
from pydantic_ai.models import ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RunUsage
from temporalio import activity, workflow
from temporalio.exceptions import ApplicationError

from .._pydantic_ai_private import get_current_run_context, stamp_tool_call_parts
from .._store_provider import store_for
from .._tracing import traced_append
from ..content import CANONICAL_FORM, content_hash, resent_hash
from ..embeddings._index import embedded_append
from ..embeddings._source import embedder_for
from ..errors import EmbeddingUnavailable, HistoryMismatch, RecallError, StoreUnavailable, non_retryable, retryable

if TYPE_CHECKING:
    from pydantic_ai.embeddings import Embedder

    from .._store_provider import StoreProvider
    from ..models import HistoryWindow
    from ..search import SummaryRule
    from ..store.protocol import AppendRequest, AppendResult, Fence

__all__ = ('MARKER_KEY', 'PersistingModel', 'persistable', 'take_marker')

MARKER_KEY = 'temporal_recall.persisted'
"""Key in `ModelResponse.metadata` saying the response was stored by the step's own activity."""

log = logging.getLogger('temporal_recall.capability')

RESPONSE_WRITE_ATTEMPTS = 4
"""How often the response write is tried inside the activity before the activity fails."""

RESPONSE_WRITE_BACKOFF = 0.5
"""Seconds before the second try; doubled before each further one."""


@dataclass(frozen=True)
class Marker:
    content_hash: str
    """The content hash of the response as stored."""
    metadata_was_none: bool
    """Whether the response's `metadata` was `None` before the marker was added (restored on removal)."""
    view: ViewCheck | None = None
    """What the step wrote before the response (`None` in histories recorded before it was added)."""
    form: int = 1
    """The canonical form its hashes were made in (`content.CANONICAL_FORM`); 1 in histories recorded before form 2."""


@dataclass(frozen=True)
class ViewCheck:
    """What a step's write put before its response, for the workflow to compare with the agent's history.

    Inside an activity the wrapper sees the messages as pydantic-ai prepared them for the model:
    consecutive requests merged into one, a mid-history system prompt rendered as `<system>` user
    text by a model without inline system prompts. The store checked only the message it attached
    after (`start`), so the write matches the agent's history when that history has `length`
    messages before the response and `digest` over its messages from `start` on.
    """

    length: int
    start: int
    digest: str

    def matches(self, hashes: Sequence[str]) -> bool:
        return len(hashes) == self.length and view_digest(hashes[self.start :]) == self.digest


def view_digest(hashes: Sequence[str]) -> str:
    """One hash for a sequence of messages' content hashes."""
    return hashlib.sha256('\n'.join(hashes).encode()).hexdigest()


def persistable(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """The messages a store keeps: all but responses that are not final (suspended, interrupted, partial)."""
    return [m for m in messages if not (isinstance(m, ModelResponse) and m.state != 'complete')]


def _marked(metadata: dict[str, Any] | None, stored_hash: str, view: ViewCheck) -> dict[str, Any]:
    check = {'length': view.length, 'start': view.start, 'digest': view.digest}
    marker = {'hash': stored_hash, 'metadata_was_none': metadata is None, 'view': check, 'form': CANONICAL_FORM}
    return {**(metadata or {}), MARKER_KEY: marker}


def take_marker(response: ModelResponse) -> Marker | None:
    """Remove this module's marker from `response` and return it (`None` if the response has none)."""
    metadata = response.metadata
    if not metadata or MARKER_KEY not in metadata:
        return None
    raw: Any = metadata[MARKER_KEY]
    rest = {key: value for key, value in metadata.items() if key != MARKER_KEY}
    was_none = bool(raw.get('metadata_was_none')) if isinstance(raw, dict) else False
    response.metadata = None if was_none and not rest else rest
    stored = raw.get('hash') if isinstance(raw, dict) else None
    view: Any = raw.get('view') if isinstance(raw, dict) else None
    if not stored:
        return None
    check = (
        ViewCheck(length=int(view['length']), start=int(view['start']), digest=str(view['digest']))
        if isinstance(view, dict)
        else None
    )
    form = raw.get('form', 1) if isinstance(raw, dict) else 1
    return Marker(content_hash=str(stored), metadata_was_none=was_none, view=check, form=int(form))


@contextmanager
def _failing_for_good() -> Generator[None]:
    """Inside an activity, let a `RecallError` that another attempt would meet again (another scope's
    conversation, an unserializable message, a run without a conversation id) fail the activity for
    good; a mismatch, an outage and every error outside an activity pass as they are. Around a whole
    model request, so every step's hashing and writing is covered, whichever path it takes."""
    try:
        yield
    except (HistoryMismatch, StoreUnavailable, EmbeddingUnavailable):
        raise
    except RecallError as error:
        if not activity.in_activity():
            raise
        raise non_retryable(error) from None


def _raise_retryable(error: StoreUnavailable | EmbeddingUnavailable) -> NoReturn:
    """Fail the activity so Temporal retries it, with the store's (or embedding model's) own message (`retryable`)."""
    if not activity.in_activity():
        raise error
    raise retryable(error) from None


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
    """What a `PersistingModel` needs from the capability that wraps it (`ConversationRecall`).

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


@dataclass(init=False)
class PersistingModel(WrapperModel):
    """Writes a step to the conversation store from inside the request that makes it (see module doc)."""

    capability: StepOwner

    def __init__(self, wrapped: Any, capability: StepOwner) -> None:
        super().__init__(wrapped)
        self.capability = capability

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        with _failing_for_good():
            step = self._begin(messages, model_request_parameters, get_current_run_context())
            async with _prefix_kept_on_failure(step):
                response = await self.wrapped.request(messages, model_settings, model_request_parameters)
            if step is None:
                return response
            if response.state != 'complete':
                await step.write_prefix()
                return response
            # A copy: the model may hand out a response object it keeps (a scripted model does). Stamped
            # as pydantic-ai stamps it after the request (in workflow code under Temporal): the model id,
            # and each tool call's kind and UI visibility, so the stored copy and the run's hash alike.
            response = replace(response, model_id=response.model_id or self.wrapped.model_id)
            response = stamp_tool_call_parts(response, model_request_parameters)
            stored_hash = await step.write_step(step.stamped(response))
            if stored_hash is not None:
                response.metadata = _marked(response.metadata, stored_hash, step.digest)
            return response

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncGenerator[StreamedResponse]:
        with _failing_for_good():
            step = self._begin(messages, model_request_parameters, run_context or get_current_run_context())
            async with (
                _prefix_kept_on_failure(step),
                self.wrapped.request_stream(messages, model_settings, model_request_parameters, run_context) as stream,
            ):
                yield stream
            # Only a stream consumed to its end gets here; a failed or abandoned one raised at the yield.
            if step is None:
                return
            response = stream.get()
            if response.state != 'complete':
                await step.write_prefix()
                return
            response.model_id = response.model_id or self.wrapped.model_id
            stored_hash = await step.write_step(step.stamped(response))
            if stored_hash is not None:
                # `get()` builds a new response each time from the stream's fields: mark the stream.
                stream.metadata = _marked(stream.metadata, stored_hash, step.digest)

    def _begin(
        self, messages: list[ModelMessage], parameters: ModelRequestParameters, ctx: RunContext[Any] | None
    ) -> _Step | None:
        """The `_Step` that will write the request's new messages with the response, or `None` to leave it."""
        if workflow.in_workflow() or ctx is None:
            # In workflow code this model only answers questions; the activity's copy sends the request.
            return None
        if not activity.in_activity():
            # In-process the run context holds the agent's own history, before pydantic-ai merged
            # consecutive requests and the model prepared it (a mid-history system prompt rendered as
            # `<system>` user text, say): store that, so the conversation is `all_messages()`.
            # Inside an activity `ctx.messages` is not carried (reading it raises); there the
            # workflow side compares the view (the marker's `view`) with its history instead.
            messages = ctx.messages or messages
        return _Step.start(self.capability, ctx, persistable(messages), parameters)


@asynccontextmanager
async def _prefix_kept_on_failure(step: _Step | None) -> AsyncGenerator[None]:
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
class _Step:
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
    ) -> _Step:
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
            _raise_retryable(error)

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
        record of the key), which dominated a step's cost when every request wrote twice (issue 42).
        A retried attempt writes the messages under that key again, which an earlier attempt may
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
                    _raise_retryable(error)
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
            raise ApplicationError(
                f'Attempt {self.attempt} of {self.unit} was superseded by a later attempt, which already wrote '
                'to the conversation; this attempt stores nothing.',
                type='SupersededAttempt',
            )
        self.capability.record_write(result)
        return result
