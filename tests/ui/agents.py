"""The chat agent's script, and its durable twin that `RunPromptWorkflow` runs (module level, for the sandbox)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import TemporalDurability
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from temporal_recall import ConversationRecall, RecallDeps

from .._said import user_prompts

ORDER_QUESTION = 'Where is order A-1001?'
RECALL_PREFIX = 'recall '
RACE_PROMPT = 'race'


def lookup_order(order: str) -> str:
    """Where an order is."""
    return f'{order}: shipped from Lyon, arriving Tuesday'


def _last_prompt(messages: list[ModelMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if part.part_kind == 'user-prompt' and isinstance(part.content, str):
                    return part.content
    return ''


def reply(messages: list[ModelMessage]) -> ModelResponse:
    """The scripted turn: an order lookup, a recall search (`recall <query>`), or an echo."""
    last = messages[-1]
    returns = [p for p in last.parts if isinstance(p, ToolReturnPart)] if isinstance(last, ModelRequest) else []
    if returns:
        return ModelResponse(parts=[TextPart(f'I found: {returns[0].model_response_str()}')])
    prompt = _last_prompt(messages)
    if prompt == ORDER_QUESTION:
        return ModelResponse(parts=[ToolCallPart('lookup_order', {'order': 'A-1001'}, tool_call_id='call-order')])
    if prompt.startswith(RECALL_PREFIX):
        query = {'query': prompt.removeprefix(RECALL_PREFIX)}
        return ModelResponse(parts=[ToolCallPart('search_conversation_history', query, tool_call_id='call-recall')])
    return ModelResponse(parts=[TextPart(f'You said: {prompt}')])


class Outage:
    """A provider that answers the next `failures` model calls with a 503, and records every call's prompts."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.sent: list[list[str]] = []
        """The user prompts each model call was sent, in order, failed calls included."""

    def call(self, messages: list[ModelMessage]) -> None:
        self.sent.append(user_prompts(messages))
        if self.failures:
            self.failures -= 1
            raise ModelHTTPError(503, 'chat-script', body='the provider is overloaded')


def chat_model(race: Callable[[], Awaitable[None]] | None = None, outage: Outage | None = None) -> FunctionModel:
    """The script as a model, streamed (what the UI adapters ask for) and not (what a workflow asks for).

    `race` runs before the model answers the prompt `race`: another request changing the conversation.
    `outage` sees every call first, and fails those it is told to.
    """

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if outage is not None:
            outage.call(messages)
        return reply(messages)

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        if outage is not None:
            outage.call(messages)
        if race is not None and _last_prompt(messages) == RACE_PROMPT and isinstance(messages[-1], ModelRequest):
            await race()
        for part in reply(messages).parts:
            if isinstance(part, ToolCallPart):
                yield {0: DeltaToolCall(part.tool_name, part.args_as_json_str(), tool_call_id=part.tool_call_id)}
            elif isinstance(part, TextPart):
                for word in part.content.split(' '):
                    yield word if word == part.content.split(' ')[0] else f' {word}'

    return FunctionModel(respond, stream_function=stream, model_name='chat-script')


def chat_agent(
    store: Any, race: Callable[[], Awaitable[None]] | None = None, outage: Outage | None = None
) -> Agent[RecallDeps, str]:
    """The agent behind the chat UI: the scope comes from `RecallDeps` (the app's authenticated tenant)."""
    return Agent(
        chat_model(race, outage),
        deps_type=RecallDeps,
        tools=[lookup_order],
        capabilities=[ConversationRecall(store=store)],
    )


durable_chat_agent = Agent(
    chat_model(),
    name='chat',
    deps_type=RecallDeps,
    tools=[lookup_order],
    capabilities=[ConversationRecall(), TemporalDurability()],
)
"""The same agent for `RunPromptWorkflow`: the worker's store, every step in its activities."""
