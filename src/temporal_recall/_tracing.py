"""temporal-recall's OpenTelemetry spans: the one tracer, the span names, and what they may carry.

Through `opentelemetry-api` alone: without a tracer provider the API hands out non-recording spans,
so tracing costs next to nothing; with one (Logfire's, or an OTLP exporter's) each span is a child
of whatever span is current, such as the activity span of Temporal's `TracingInterceptor` or a
pydantic-ai model-request span. Attributes are ids, counts and sizes only: never message text, never
query text, and an error is named by its type, not its message (which may quote either). A trace
backend is often readable by more people than the store.

    temporal_recall.write          a persistence write: a model request's prefix or response, a store_step
    temporal_recall.search         one search, whatever asked (activity, model tool, CLI, HTTP API)
    temporal_recall.load_history   the load_history activity
    temporal_recall.codec.store    the payload codec storing new bodies
    temporal_recall.codec.fetch    the payload codec reading bodies it has not cached
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.util.types import AttributeValue

if TYPE_CHECKING:
    from .store.protocol import AppendRequest, AppendResult, DeltaWriter

__all__ = (
    'CODEC_FETCH',
    'CODEC_STORE',
    'LOAD_HISTORY',
    'SEARCH',
    'TRACER_NAME',
    'WRITE',
    'note',
    'span',
    'traced_append',
)

TRACER_NAME = 'temporal_recall'
WRITE = 'temporal_recall.write'
SEARCH = 'temporal_recall.search'
LOAD_HISTORY = 'temporal_recall.load_history'
CODEC_STORE = 'temporal_recall.codec.store'
CODEC_FETCH = 'temporal_recall.codec.fetch'

_tracer = trace.get_tracer(TRACER_NAME)
"""A proxy until a tracer provider is set, which it then follows: setting one after import works."""


def _attributes(values: dict[str, AttributeValue | None]) -> dict[str, AttributeValue]:
    return {f'temporal_recall.{name}': value for name, value in values.items() if value is not None}


@contextmanager
def span(name: str, **attributes: AttributeValue | None) -> Generator[Span]:
    """A span named `name`, current inside the block, with `attributes` (prefixed `temporal_recall.`;
    `None` ones left out). An exception ends it with an error status naming only the exception's type."""
    with _tracer.start_as_current_span(
        name, attributes=_attributes(attributes), record_exception=False, set_status_on_exception=False
    ) as current:
        try:
            yield current
        except BaseException as error:
            current.set_attribute('error.type', type(error).__name__)
            current.set_status(Status(StatusCode.ERROR))
            raise


def note(current: Span, **attributes: AttributeValue | None) -> None:
    """Add what became known inside the span (counts of a result), under the same rules as `span`."""
    current.set_attributes(_attributes(attributes))


async def traced_append(store: DeltaWriter, request: AppendRequest, *, write: str) -> AppendResult:
    """`store.append(request)` inside a `WRITE` span; `write` says which (`prefix`, `response`, `store_step`).

    Without a tracer provider the span would be a non-recording one carrying the current span's context, which
    is what the store sees anyway: it is left out (checked per call, so a provider installed later is followed).
    """
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return await store.append(request)
    with span(
        WRITE,
        write=write,
        conversation_id=request.conversation_id,
        run_id=request.run_id,
        scoped=request.scope is not None,
        messages=len(request.messages),
        base_length=request.base_length,
        attempt=None if request.fence is None else request.fence.attempt,
    ) as current:
        result = await store.append(request)
        note(current, stored=result.stored, length=result.length, replayed=result.replayed, fenced=result.fenced)
        return result
