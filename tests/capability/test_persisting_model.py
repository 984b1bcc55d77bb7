"""The wrapper model that writes a step from inside its own request, driven directly (no Temporal, a real store)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import RunContext
from pydantic_ai._run_context import set_current_run_context
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage, RunUsage
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from temporal_recall import ConversationRecall, RecallDeps
from temporal_recall.capability import _step_write as step_write
from temporal_recall.capability._marker import MARKER_KEY, take_marker
from temporal_recall.capability._persisting_model import PersistingModel
from temporal_recall.content import content_hash
from temporal_recall.errors import MessageNotSerializable, StoreUnavailable
from temporal_recall.store import SqliteConversationStore

AT = datetime(2026, 1, 1, tzinfo=UTC)
PARAMS = ModelRequestParameters()


def user(text: str) -> ModelRequest:
    return ModelRequest(parts=[UserPromptPart(text, timestamp=AT)], timestamp=AT)


def answer(text: str, **fields: Any) -> ModelResponse:
    return ModelResponse(parts=[TextPart(text)], timestamp=AT, usage=RequestUsage(input_tokens=7), **fields)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteConversationStore]:
    opened = await SqliteConversationStore.open(tmp_path / 'recall.db')
    try:
        yield opened
    finally:
        await opened.close()


class Flaky:
    """The real store, failing the first `failures` appends as if it were unreachable; it keeps every
    request it was asked to append."""

    def __init__(self, store: SqliteConversationStore, failures: int) -> None:
        self._store = store
        self.failures = failures
        self.appends = 0
        self.requests: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def append(self, request: Any) -> Any:
        self.appends += 1
        self.requests.append(request)
        if self.failures:
            self.failures -= 1
            raise StoreUnavailable('the store is unreachable for a moment')
        return await self._store.append(request)


def _persisting(store: Any, scripted: FunctionModel) -> tuple[PersistingModel, RunContext[RecallDeps]]:
    """`scripted` wrapped as the capability over `store` wraps a model, and a run context of conversation `c`."""
    capability: ConversationRecall[Any] = ConversationRecall(store=store)
    model = PersistingModel(scripted, capability)
    return model, RunContext(deps=RecallDeps(), model=model, usage=RunUsage(), run_id='run-1', conversation_id='c')


async def _request(store: Any, messages: list[ModelMessage], response: ModelResponse) -> ModelResponse:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return response

    model, ctx = _persisting(store, FunctionModel(respond, model_name='scripted'))
    with set_current_run_context(ctx):
        return await model.request(messages, None, PARAMS)


async def _stored(store: SqliteConversationStore) -> list[ModelMessage]:
    return [entry.message for entry in await store.load_entries('c') or []]


async def test_the_prompt_and_the_answer_are_stored_in_one_write_after_the_model_answers(
    store: SqliteConversationStore,
):
    counting = Flaky(store, failures=0)
    returned = await _request(counting, [user('hello')], answer('hi there'))
    assert counting.appends == 1  # one write per model request (issue 42)
    stored = await _stored(store)
    assert [type(m).__name__ for m in stored] == ['ModelRequest', 'ModelResponse']
    assert stored[1].model_id == returned.model_id == 'function:scripted'  # stamped before it was stored
    marker = take_marker(returned)
    assert marker is not None and marker.content_hash == content_hash(stored[1])
    assert returned.metadata is None  # restored exactly as the model produced it
    record = await store.read_record('c')
    assert record is not None and record.usage == RunUsage(requests=1, input_tokens=7)


async def test_the_marker_leaves_the_responses_own_metadata_alone(store: SqliteConversationStore):
    returned = await _request(store, [user('hello')], answer('hi', metadata={'trace': 'abc'}))
    assert set(returned.metadata or {}) == {'trace', MARKER_KEY}
    assert take_marker(returned) is not None
    assert returned.metadata == {'trace': 'abc'}
    assert take_marker(returned) is None


async def test_a_response_that_is_not_final_is_never_stored(store: SqliteConversationStore):
    returned = await _request(store, [user('think long')], answer('partial', state='suspended'))
    assert [type(m).__name__ for m in await _stored(store)] == ['ModelRequest']  # the prompt only
    assert take_marker(returned) is None


async def test_a_request_that_does_not_attach_is_left_to_the_workflow(store: SqliteConversationStore):
    await _request(store, [user('hello')], answer('hi there'))
    # A history processor dropped the first turn: the request's last response is not where the store has it.
    rewritten: list[ModelMessage] = [answer('hi there'), user('next')]
    returned = await _request(store, rewritten, answer('sure'))
    assert len(await _stored(store)) == 2
    assert take_marker(returned) is None


async def test_a_failed_response_write_is_retried_inside_the_request(
    store: SqliteConversationStore, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(step_write, 'RESPONSE_WRITE_BACKOFF', 0.0)
    flaky = Flaky(store, failures=0)
    calls: list[int] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(1)
        flaky.failures = 2  # the store goes away while the model answers
        return answer('hi there')

    model, ctx = _persisting(flaky, FunctionModel(respond, model_name='scripted'))
    with set_current_run_context(ctx):
        returned = await model.request([user('hello')], None, PARAMS)
    assert calls == [1] and flaky.appends == 3  # two failures, then the prompt and the response
    assert take_marker(returned) is not None
    assert len(await _stored(store)) == 2


async def test_a_response_write_that_keeps_failing_fails_the_request(
    store: SqliteConversationStore, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(step_write, 'RESPONSE_WRITE_BACKOFF', 0.0)
    flaky = Flaky(store, failures=0)

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        flaky.failures = 100
        return answer('hi there')

    model, ctx = _persisting(flaky, FunctionModel(respond, model_name='scripted'))
    with set_current_run_context(ctx), pytest.raises(StoreUnavailable):
        await model.request([user('hello')], None, PARAMS)
    assert flaky.appends == step_write.RESPONSE_WRITE_ATTEMPTS
    assert await _stored(store) == []  # the activity fails, and its retry writes the step


async def _plain_run(
    store: SqliteConversationStore, prompt: str, history: list[ModelMessage], conversation_id: str
) -> list[ModelMessage]:
    from pydantic_ai import Agent

    from temporal_recall.testing import scripted_model, text

    agent = Agent(scripted_model(text('repeat this exactly')), capabilities=[ConversationRecall(store=store)])
    result = await agent.run(prompt, message_history=history, conversation_id=conversation_id)
    return result.all_messages()


async def _stored_as(store: SqliteConversationStore, conversation_id: str) -> list[str]:
    return [content_hash(entry.message) for entry in await store.load_entries(conversation_id) or []]


async def test_a_plain_run_stores_the_agents_history_not_the_merged_request_the_model_saw(
    store: SqliteConversationStore,
):
    # A request of its own before the prompt's (the same words again would be said once: `_repeated_prompts`).
    history: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart('Answer in one line.')])]
    messages = await _plain_run(store, 'repeat this exactly', history, 'c-merged')
    assert len(messages) == 3
    assert await _stored_as(store, 'c-merged') == [content_hash(m) for m in messages]
    record = await store.read_record('c-merged')
    assert record is not None and record.branches == []  # nothing merged was ever written


async def test_a_plain_run_stores_a_mid_history_system_prompt_as_a_system_prompt(store: SqliteConversationStore):
    system = ModelRequest(parts=[SystemPromptPart('Answer tersely.', timestamp=AT)], timestamp=AT)
    # Sent to a model without inline system prompts as `<system>` user text, here merged with the prompt.
    hello = await _plain_run(store, 'Hi', [], 'c-system-merged')
    merged = await _plain_run(store, 'Paris?', [*hello, system], 'c-system-merged')
    assert len(merged) == 5
    assert await _stored_as(store, 'c-system-merged') == [content_hash(m) for m in merged]
    # Continuing a stored conversation with a system prompt between two responses.
    first = await _plain_run(store, 'Paris?', [user('Hi'), answer('Hello.'), system, answer('Ok.')], 'c-system')
    second = await _plain_run(store, 'And Rome?', first, 'c-system')
    assert len(second) == 8
    stored = [entry.message for entry in await store.load_entries('c-system') or []]
    assert [content_hash(m) for m in stored] == [content_hash(m) for m in second]
    assert isinstance(stored[2].parts[0], SystemPromptPart)


class ModelDown(Exception):
    """What a provider raises when it cannot answer."""


async def test_a_failed_model_call_still_stores_the_prompt_it_was_sent(store: SqliteConversationStore):
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise ModelDown('the provider is down')

    model, ctx = _persisting(store, FunctionModel(respond, model_name='scripted'))
    with set_current_run_context(ctx), pytest.raises(ModelDown):
        await model.request([user('hello')], None, PARAMS)
    assert [content_hash(m) for m in await _stored(store)] == [content_hash(user('hello'))]
    # The retried request finds its prompt stored and adds the answer only.
    returned = await _request(store, [user('hello')], answer('hi there'))
    assert take_marker(returned) is not None
    assert [type(m).__name__ for m in await _stored(store)] == ['ModelRequest', 'ModelResponse']


async def test_a_cancelled_model_call_still_stores_the_prompt_it_was_sent(store: SqliteConversationStore):
    started = asyncio.Event()

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        started.set()
        await asyncio.Event().wait()  # never answers
        raise AssertionError('unreachable')

    model, ctx = _persisting(store, FunctionModel(respond, model_name='scripted'))

    async def call() -> None:
        with set_current_run_context(ctx):
            await model.request([user('hello')], None, PARAMS)

    task = asyncio.create_task(call())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [content_hash(m) for m in await _stored(store)] == [content_hash(user('hello'))]


async def test_a_failed_stream_still_stores_the_prompt_it_was_sent(store: SqliteConversationStore):
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        yield 'half an ans'
        raise ModelDown('the connection dropped')

    model, ctx = _persisting(store, FunctionModel(stream_function=stream, model_name='scripted'))
    with set_current_run_context(ctx), pytest.raises(ModelDown):
        async with model.request_stream([user('hello')], None, PARAMS, ctx) as streamed:
            async for _ in streamed:
                pass
    assert [content_hash(m) for m in await _stored(store)] == [content_hash(user('hello'))]


async def test_a_stream_stores_the_prompt_and_the_answer_in_one_write(store: SqliteConversationStore):
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        yield 'hi '
        yield 'there'

    counting = Flaky(store, failures=0)
    model, ctx = _persisting(counting, FunctionModel(stream_function=stream, model_name='scripted'))
    with set_current_run_context(ctx):
        async with model.request_stream([user('hello')], None, PARAMS, ctx) as streamed:
            async for _ in streamed:
                pass
    assert counting.appends == 1
    stored = await _stored(store)
    assert [type(m).__name__ for m in stored] == ['ModelRequest', 'ModelResponse']
    returned = streamed.get()
    marker = take_marker(returned)
    assert marker is not None and marker.content_hash == content_hash(stored[1])


async def test_the_store_files_the_step_under_the_hashes_made_for_the_marker(
    store: SqliteConversationStore, monkeypatch: pytest.MonkeyPatch
):
    from temporal_recall.store.index import _terms

    def not_again(message: ModelMessage) -> str:
        raise AssertionError('the store serialised a message the step had hashed already')

    monkeypatch.setattr(_terms, 'content_hash', not_again)
    recording = Flaky(store, failures=0)
    first = await _request(recording, [user('hello')], answer('hi there'))
    markers = [take_marker(first)]  # as the capability takes it, before the response joins the history
    second = await _request(recording, [user('hello'), first, user('and then?')], answer('then this'))
    markers.append(take_marker(second))
    monkeypatch.undo()
    assert len(recording.requests) == 2
    for request in recording.requests:
        assert request.content_hashes == [content_hash(message) for message in request.messages]
    assert [marker and marker.content_hash for marker in markers] == [r.content_hashes[-1] for r in recording.requests]
    stored = await _stored(store)
    assert [content_hash(message) for message in stored] == [
        hash_ for request in recording.requests for hash_ in request.content_hashes
    ]


def _unserializable_answer() -> ModelResponse:
    """An answer no store can hold: its text has a lone surrogate (half of a UTF-16 pair)."""
    return answer('half a pair: \ud83d')


async def test_an_unserializable_response_fails_a_plain_run_with_the_stores_error(store: SqliteConversationStore):
    with pytest.raises(MessageNotSerializable, match='lone surrogate'):
        await _request(store, [user('hello')], _unserializable_answer())
    # The step is one write, refused whole before it reached the store.
    assert await _stored(store) == []


async def test_an_unserializable_response_fails_its_activity_for_good(store: SqliteConversationStore):
    # Another attempt would meet the same response: Temporal must not retry it (forever, by default).
    with pytest.raises(ApplicationError) as failed:
        await ActivityEnvironment().run(_request, store, [user('hello')], _unserializable_answer())
    assert failed.value.non_retryable and failed.value.type == 'MessageNotSerializable'
