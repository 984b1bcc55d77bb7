"""Core compaction (pydantic-ai 2.78) as an application writes it, for the recall tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability, CompactionRequest, CompactionResult
from pydantic_ai.messages import CompactionPart, ModelRequest, UserPromptPart
from pydantic_ai.models import ModelRequestContext

SUMMARY = 'Summary: the user talked about earlier orders.'


@dataclass
class SummarizeEarlierTurns(AbstractCapability[Any]):
    """Past `threshold` messages, asks for a compaction when a turn starts, and replaces everything before
    the request being answered with one summary (a `CompactionPart` in a request, as an app's own summary is kept)."""

    threshold: int = 4

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        last = request_context.messages[-1]
        starts_a_turn = isinstance(last, ModelRequest) and any(isinstance(p, UserPromptPart) for p in last.parts)
        if starts_a_turn and len(request_context.messages) > self.threshold:
            ctx.request_compaction(reason='threshold')
        return request_context

    async def compact_history(self, ctx: RunContext[Any], request: CompactionRequest) -> CompactionResult | None:
        part = CompactionPart(content=SUMMARY)
        kept = request.messages[-1]
        return CompactionResult(messages=[ModelRequest(parts=[part]), kept], part=part, handler='summary', kept_from=1)
