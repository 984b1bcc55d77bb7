"""Activities over the store: thin adapters that turn store errors into Temporal's vocabulary.

Deterministic failures become non-retryable `ApplicationError`s named by our exception's class, so
workflow code can tell them apart; an unreachable store is retried, its own message recorded on the
activity, never a silent hang. Both heartbeat while they run, so the short `heartbeat_timeout` that
`recall()` and `load_history()` schedule them with tells a dead worker from a slow store.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

from pydantic_ai.agent.abstract import AbstractAgent
from pydantic_ai.embeddings import Embedder
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ToolReturnPart,
    UserPromptPart,
)
from temporalio import activity

from .._store_provider import StoreProvider
from .._tracing import LOAD_HISTORY, note, span
from ..capability._conversation_recall import agent_embedder
from ..content import content_hash
from ..embeddings._source import EmbedderSource, as_embedder
from ..errors import (
    EmbeddingUnavailable,
    PayloadTooLarge,
    RecallError,
    StoreUnavailable,
    UnknownConversation,
    non_retryable,
    retryable,
)
from ..models import HistoryRequest, HistoryWindow, LoadedHistory, SearchRequest, SearchResult
from ..search.plan import search_index
from ._names import LOAD_HISTORY_ACTIVITY, SEARCH_ACTIVITY

__all__ = ('MAX_HISTORY_PAYLOAD_BYTES', 'RecallActivities', 'heartbeating')

MAX_HISTORY_PAYLOAD_BYTES = 1_500_000
"""Temporal refuses payloads over 2 MB by default; stay clear of it with headroom for metadata."""

UNTIMED_HEARTBEAT_SECONDS = 5.0
"""How often to heartbeat when the activity was scheduled without a heartbeat timeout (a workflow
recorded before there was one): harmless, and it still lets a cancellation reach the activity."""


@contextlib.asynccontextmanager
async def heartbeating() -> AsyncGenerator[None]:
    """Heartbeat in the background while the block runs: twice per heartbeat timeout.

    The SDK sends them on to the server at most every 0.8 of the timeout, so the server hears from a
    live worker within every timeout, and from a killed one never again: its attempt times out and
    is retried on another worker. The beats come from the event loop, so a block that holds the loop
    (CPU-bound work in async code) for a whole timeout would be taken for a dead worker; the store's
    calls await I/O. Called outside an activity (a test calling the method itself), it does nothing.
    """
    if not activity.in_activity():
        yield
        return
    timeout = activity.info().heartbeat_timeout
    interval = timeout.total_seconds() / 2 if timeout else UNTIMED_HEARTBEAT_SECONDS

    async def beat() -> None:
        # The server counts the timeout from the attempt's start: a store call shorter than half of it
        # (nearly all) sends no heartbeat at all, and costs no extra request to the server.
        while True:
            await asyncio.sleep(interval)
            activity.heartbeat()

    task = asyncio.create_task(beat())
    try:
        yield
    except BaseException:
        task.cancel()
        with contextlib.suppress(BaseException):  # the block's own error is the one to report
            await task
        raise
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):  # anything else is a crashed beat: say so
        await task


class RecallActivities:
    """The store-backed activities, bound to one store (a worker's `RecallPlugin` makes one per plugin).

    A search's query is embedded with the embedder of the request's agent's `ConversationRecall` (one of
    `agents`, by `SearchRequest.agent`), else with `embedder` (the worker's), else as `search_index` does
    without one: the store's own embedder, or for a search asking for meaning, the model of its vectors.
    """

    def __init__(
        self,
        store: str | StoreProvider | Any,
        *,
        embedder: EmbedderSource | None = None,
        agents: Sequence[AbstractAgent[Any, Any]] = (),
    ) -> None:
        self.store = StoreProvider.coerce(store)
        self.embedder = as_embedder(embedder)
        self.agents = tuple(agents)

    def all(self) -> Sequence[Callable[..., Any]]:
        return [self.search, self.load_history]

    def embedder_for(self, agent: str | None) -> Embedder | None:
        """The embedder a search for `agent` uses: its `ConversationRecall`'s, else the worker's."""
        named = next((found for found in self.agents if agent is not None and found.name == agent), None)
        own = agent_embedder(named) if named is not None else None
        return own if own is not None else self.embedder

    @activity.defn(name=SEARCH_ACTIVITY)
    async def search(self, request: SearchRequest) -> SearchResult:
        async with heartbeating():
            return await self._search(request)

    async def _search(self, request: SearchRequest) -> SearchResult:
        try:
            store = await self.store.get()
            return await search_index(store, request, embedder=self.embedder_for(request.agent))
        except UnknownConversation:
            # Fail closed, and say the same thing for "absent" and "someone else's".
            return SearchResult(
                query=request.query,
                message=f'No conversation {request.conversation_id!r} is stored in this scope; nothing was searched.',
            )
        except (StoreUnavailable, EmbeddingUnavailable) as error:
            raise retryable(error) from None
        except RecallError as error:
            raise non_retryable(error) from error

    @activity.defn(name=LOAD_HISTORY_ACTIVITY)
    async def load_history(self, request: HistoryRequest) -> LoadedHistory:
        with span(
            LOAD_HISTORY,
            conversation_id=request.conversation_id,
            scoped=request.scope is not None,
            limit=request.limit,
            max_bytes=request.max_bytes,
        ) as current:
            try:
                async with heartbeating():
                    loaded = await self._load_history(request)
            except StoreUnavailable as error:
                raise retryable(error) from None  # retried by Temporal, showing the store's message
            note(current, exists=loaded.exists, messages=loaded.length, offset=loaded.window and loaded.window.offset)
            return loaded

    async def _load_history(self, request: HistoryRequest) -> LoadedHistory:
        store = await self.store.get()
        record = await store.read_scoped_record(request.conversation_id, request.scope)
        if record is None:
            return LoadedHistory(conversation_id=request.conversation_id, exists=False)
        entries = await store.read_history(record.head_id, limit=None if request.max_bytes else request.limit)
        stored = [entry.message for entry in entries]
        messages, window = stored, None
        if request.max_bytes is not None:
            # The whole branch is read so the window's offset counts from the conversation's start;
            # newest_turns measures what it keeps, which is at most one payload.
            tail = stored if request.limit is None else stored[len(stored) - min(request.limit, len(stored)) :]
            offset = len(stored) - newest_turns(tail, min(request.max_bytes, MAX_HISTORY_PAYLOAD_BYTES))
            messages = stored[offset:]
            if offset:
                window = HistoryWindow(offset=offset, base_hash=content_hash(stored[offset - 1]))
        elif (size := len(ModelMessagesTypeAdapter.dump_json(messages))) > MAX_HISTORY_PAYLOAD_BYTES:
            raise non_retryable(
                PayloadTooLarge(
                    f'Conversation {request.conversation_id!r} is {size:,} bytes serialized, more than the '
                    f'{MAX_HISTORY_PAYLOAD_BYTES:,} that fit in one Temporal payload. Load it with a `limit`, or '
                    'compact it; the full history stays in the store and searchable.'
                )
            )
        return LoadedHistory(
            conversation_id=request.conversation_id,
            exists=True,
            messages=messages,
            head_id=record.head_id,
            length=len(messages),
            window=window,
        )


def newest_turns(messages: Sequence[ModelMessage], max_bytes: int) -> int:
    """How many of the newest `messages` make whole turns of at most `max_bytes` serialized.

    A history cut anywhere else could open with a tool return whose call was left out, which models
    refuse, so it starts at a request carrying a user prompt. When even the last turn is larger,
    nothing is loaded: the run starts afresh, and every message stays stored and searchable.
    """
    total = 1  # `[a,b]` is 1 + (len(a) + 1) + (len(b) + 1) bytes: each message with its comma or `]`
    kept = 0
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        total += len(ModelMessagesTypeAdapter.dump_json([message])) - 1
        if total > max_bytes:
            return kept
        if _opens_a_turn(message):
            kept = len(messages) - index
    return len(messages)  # all of it fits: the whole history, system prompts before the first turn included


def _opens_a_turn(message: ModelMessage) -> bool:
    """A request with a user prompt and no tool return (whose call would be left out of the window)."""
    return (
        isinstance(message, ModelRequest)
        and any(isinstance(part, UserPromptPart) for part in message.parts)
        and not any(isinstance(part, ToolReturnPart) for part in message.parts)
    )
