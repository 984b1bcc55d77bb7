"""The model wrapper: a model request that writes its own step, inside its Temporal activity.

pydantic-ai calls `ConversationRecall.get_wrapper_model` inside the model-request activity (and the
streaming one), and in-process on a plain `agent.run`. There the wrapper sees what no workflow-side
hook can without an activity of its own: the request's messages, the response, the run context and
the activity's identity. So each step is written by the request that makes it (`_step_write`), and
the response carries a marker back to the workflow (`_marker`). More in docs/design/store.md ("The step write").
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any, Protocol

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from temporalio import activity, workflow

from .._pydantic_ai_private import get_current_run_context, stamp_tool_call_parts
from ._activity_errors import failing_for_good
from ._marker import marked
from ._step_write import StepOwner, StepWrite, persistable, prefix_kept_on_failure

__all__ = ('PersistingModel',)


class _Marked(Protocol):
    """What carries the marker back to the workflow: the response, or the stream the run builds it from."""

    metadata: dict[str, Any] | None


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
        with failing_for_good():
            step = self._begin(messages, model_request_parameters, get_current_run_context())
            async with prefix_kept_on_failure(step):
                response = await self.wrapped.request(messages, model_settings, model_request_parameters)
            if step is None:
                return response
            return await self._write(step, response, lambda final: self._stamped(final, model_request_parameters))

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncGenerator[StreamedResponse]:
        with failing_for_good():
            step = self._begin(messages, model_request_parameters, run_context or get_current_run_context())
            async with (
                prefix_kept_on_failure(step),
                self.wrapped.request_stream(messages, model_settings, model_request_parameters, run_context) as stream,
            ):
                yield stream
            # Only a stream consumed to its end gets here; a failed or abandoned one raised at the yield.
            if step is None:
                return
            # `get()` builds a new response each time from the stream's fields: the stream carries the marker.
            await self._write(step, stream.get(), self._with_model_id, carrier=stream)

    def _begin(
        self, messages: list[ModelMessage], parameters: ModelRequestParameters, ctx: RunContext[Any] | None
    ) -> StepWrite | None:
        """The `StepWrite` that will write the request's new messages with the response, or `None` to leave it."""
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
        return StepWrite.start(self.capability, ctx, persistable(messages), parameters)

    async def _write(
        self,
        step: StepWrite,
        response: ModelResponse,
        stamp: Callable[[ModelResponse], ModelResponse],
        *,
        carrier: _Marked | None = None,
    ) -> ModelResponse:
        """The end of every request: store the step with the model's `response`, and return the response.

        A response that is not complete is not stored (the request's new messages are). A complete one
        is stamped first (`stamp`), as pydantic-ai stamps it after the request, so the stored copy and the
        run's hash alike; when the store took it, `carrier` (the response itself by default) is marked.
        """
        if response.state != 'complete':
            await step.write_prefix()
            return response
        response = stamp(response)
        stored_hash = await step.write_step(step.stamped(response))
        if stored_hash is not None:
            target = response if carrier is None else carrier
            target.metadata = marked(target.metadata, stored_hash, step.digest)
        return response

    def _stamped(self, response: ModelResponse, parameters: ModelRequestParameters) -> ModelResponse:
        """A copy (the model may hand out a response it keeps: a scripted model does) with the model id
        and each tool call's kind and UI visibility, as pydantic-ai stamps them in workflow code."""
        model_id = response.model_id or self.wrapped.model_id
        stamped = stamp_tool_call_parts(response, parameters)
        if stamped is response:
            return replace(response, model_id=model_id)
        stamped.model_id = model_id  # A copy already: the model's response is left as it was.
        return stamped

    def _with_model_id(self, response: ModelResponse) -> ModelResponse:
        """A streamed response with the model id, in place: the run rebuilds its own copy from the stream."""
        response.model_id = response.model_id or self.wrapped.model_id
        return response
