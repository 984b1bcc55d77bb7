"""Spans for writes, searches, history loads and codec bodies, inside the spans Temporal's tracing
interceptor and pydantic-ai's instrumentation emit, holding no message or query text: a real
`TracerProvider` and workflows on the dev server."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.contrib.opentelemetry import TracingInterceptor

from temporal_recall import RunPromptInput, RunPromptWorkflow, message_codec_plugin
from temporal_recall._tracing import CODEC_FETCH, CODEC_STORE, LOAD_HISTORY, SEARCH, WRITE
from temporal_recall.testing import DevServer, connect, export_history, replay, running_worker

from .workflows.agents import traced_output_tool_agent
from .workflows.role_workflows import RecallByRoleWorkflow

PROMPT = 'Is it sunny in Paris this afternoon?'
SECRETS = ('Paris', 'sunny', 'afternoon', '21 degrees')
"""Words only the messages and the query hold (the prompt, the tool's answer, the output, `recall('Paris')`)."""


class _Recording(SimpleSpanProcessor):
    """Exports only while a test records: the provider is process-wide and outlives the test."""

    recording = False

    def on_end(self, span: ReadableSpan) -> None:
        if self.recording:
            super().on_end(span)


_EXPORTER = InMemorySpanExporter()
_PROCESSOR = _Recording(_EXPORTER)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The spans ended while the test runs, from the process's real `TracerProvider` (set once: OpenTelemetry
    never replaces a global provider)."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(_PROCESSOR)
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    _PROCESSOR.recording = True
    try:
        yield _EXPORTER
    finally:
        _PROCESSOR.recording = False
        _EXPORTER.clear()


def _ancestors(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> list[str]:
    names: list[str] = []
    parent = span.parent
    while parent is not None and parent.span_id in by_id:
        found = by_id[parent.span_id]
        names.append(found.name)
        parent = found.parent
    return names


def _text_of(span: ReadableSpan) -> str:
    values: list[Any] = [span.name, *dict(span.attributes or {}).items()]
    for event in span.events:
        values += [event.name, *dict(event.attributes or {}).items()]
    return repr(values)


@pytest.mark.temporal
async def test_recall_spans_nest_in_the_activity_spans_and_hold_no_message_text(
    temporal_dev_server: DevServer, any_store_url: str, spans: InMemorySpanExporter
) -> None:
    plugin = message_codec_plugin(any_store_url)
    try:
        client = await connect(temporal_dev_server, plugins=[plugin], interceptors=[TracingInterceptor()])
        conversation_id = f'traced-{uuid.uuid4()}'
        async with running_worker(
            client, agents=[traced_output_tool_agent], store=any_store_url, workflows=[RecallByRoleWorkflow]
        ) as worker:
            await client.execute_workflow(
                RunPromptWorkflow.run,
                RunPromptInput(prompt=PROMPT, conversation_id=conversation_id, agent='traced_output_tool'),
                id=conversation_id,
                task_queue=worker.task_queue,
            )
            found = await client.execute_workflow(
                RecallByRoleWorkflow.run,
                args=[conversation_id, None],
                id=f'recall-{uuid.uuid4()}',
                task_queue=worker.task_queue,
            )
            assert found.hits
    finally:
        await plugin.codec.aclose()
    # A fresh codec caches nothing, so replaying the run reads its bodies back from the store.
    replaying = message_codec_plugin(any_store_url)
    try:
        history = await export_history(client, conversation_id)
        await replay([history], agents=[traced_output_tool_agent], plugins=[replaying])
    finally:
        await replaying.codec.aclose()

    finished = spans.get_finished_spans()
    by_id = {span.context.span_id: span for span in finished if span.context is not None}
    ours = [span for span in finished if span.name.startswith('temporal_recall.')]
    by_name: dict[str, list[ReadableSpan]] = {}
    for span in ours:
        by_name.setdefault(span.name, []).append(span)
    assert set(by_name) == {WRITE, SEARCH, LOAD_HISTORY, CODEC_STORE, CODEC_FETCH}
    writes = {str((span.attributes or {})['temporal_recall.write']) for span in by_name[WRITE]}
    assert writes == {'response', 'store_step'}  # a model request's messages and its response: one write

    # Each write, search and history load runs inside the span of the activity that did it.
    for span in [*by_name[WRITE], *by_name[SEARCH], *by_name[LOAD_HISTORY]]:
        activities = [name for name in _ancestors(span, by_id) if name.startswith('RunActivity:')]
        assert activities, f'{span.name} {dict(span.attributes or {})} is not inside an activity span'
    # And inside pydantic-ai's spans: a model request's writes in its `chat` span, `store_step` in the run's.
    for span in by_name[WRITE]:
        ancestors = _ancestors(span, by_id)
        if (span.attributes or {})['temporal_recall.write'] == 'store_step':
            assert ancestors[0] == 'RunActivity:agent__traced_output_tool__capability__recall__store_step'
        else:
            assert ancestors[0] == 'RunActivity:agent__traced_output_tool__model_request'
            assert 'chat scripted' in ancestors
        assert 'invoke_agent traced_output_tool' in ancestors
    assert _ancestors(by_name[SEARCH][0], by_id)[0] == 'RunActivity:temporal_recall.search'

    [search] = by_name[SEARCH]
    attributes = dict(search.attributes or {})
    assert attributes['temporal_recall.query_chars'] == len('Paris')
    assert attributes['temporal_recall.hits'] == len(found.hits)
    assert attributes['temporal_recall.conversation_id'] == conversation_id
    stored = sum(int((span.attributes or {})['temporal_recall.stored']) for span in by_name[WRITE])
    assert stored >= 5  # the prompt, two tool calls and two returns, at least
    for span in ours:
        text = _text_of(span)
        assert not any(secret in text for secret in SECRETS), text


def test_without_a_tracer_provider_the_spans_do_nothing() -> None:
    """A process that sets no tracer provider gets non-recording spans: nothing is kept or exported."""
    code = (
        'from temporal_recall._tracing import WRITE, span\n'
        'with span(WRITE, messages=1) as current:\n'
        '    assert not current.is_recording()\n'
        "print('ok')\n"
    )
    ran = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=False, timeout=60)
    assert (ran.returncode, ran.stdout.strip()) == (0, 'ok'), ran.stderr
