"""A deterministic stand-in for an LLM, so the demo and tests run offline with no API key.

It behaves like a small tool-using assistant: it looks orders up with a tool, recalls earlier
turns with the recall tool when asked what was said before, and otherwise acknowledges what it was
told. Every decision depends only on the messages it is sent.
"""

from __future__ import annotations

import re

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

__all__ = ('scripted_model',)

_ORDER = re.compile(r'\b(?:where is|status of|track)\s+(?:my\s+)?order\s+#?([A-Za-z]*-?\d[A-Za-z0-9-]*)', re.IGNORECASE)
_RECALL = re.compile(r'\b(?:what did i (?:say|tell you)|remind me|recall|earlier)\b(?:\s+about)?\s*(.*)', re.IGNORECASE)
_RECALL_TOOL = 'search_conversation_history'


def _last_prompt(messages: list[ModelMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content
    return ''


def _pending_tool_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    last = messages[-1] if messages else None
    if isinstance(last, ModelRequest):
        return [part for part in last.parts if isinstance(part, ToolReturnPart)]
    return []


def _respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = _pending_tool_returns(messages)
    if returns:
        summaries = []
        for part in returns:
            content = part.content if isinstance(part.content, str) else part.model_response_str()
            if part.tool_name == _RECALL_TOOL:
                # The tool lists hits as a header line per hit followed by an indented excerpt.
                excerpts = [line.strip() for line in content.splitlines() if line.startswith('  ')]
                if excerpts:
                    summaries.append(f'You told me earlier: "{excerpts[0]}"')
                else:
                    summaries.append("I couldn't find that earlier in our conversation.")
            else:
                summaries.append(f'{part.tool_name} says: {content}')
        return ModelResponse(parts=[TextPart(' '.join(summaries))])
    prompt = _last_prompt(messages)
    tools = {tool.name for tool in info.function_tools}
    recall = _RECALL.search(prompt)
    if recall and _RECALL_TOOL in tools:
        query = recall.group(1).strip(' ?.!') or prompt
        return ModelResponse(parts=[ToolCallPart(_RECALL_TOOL, {'query': query})])
    order = _ORDER.search(prompt)
    if order and 'lookup_order' in tools:
        return ModelResponse(parts=[ToolCallPart('lookup_order', {'order_id': order.group(1)})])
    return ModelResponse(parts=[TextPart(f'Noted: {prompt}')])


def scripted_model() -> FunctionModel:
    return FunctionModel(_respond, model_name='scripted')
