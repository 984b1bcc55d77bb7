"""Agents for the Temporal tests of recall by meaning, defined outside any workflow module (see tests/workflows)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import TemporalDurability
from pydantic_ai.embeddings import Embedder, EmbeddingResult, EmbeddingSettings
from pydantic_ai.embeddings.result import EmbedInputType
from pydantic_ai.models.function import FunctionModel

from temporal_recall import ConversationRecall, RecallDeps
from temporal_recall.embeddings import LOCAL_MODEL, WordLlamaEmbeddingModel

from ..workflows.agents import _recall_then_answer, get_weather

EMBEDDED: list[int] = []
"""How many texts `CountingModel` embedded: activity code only, so a replay adds none."""


class CountingModel(WordLlamaEmbeddingModel):
    """The local model, counting what it embeds."""

    async def embed(
        self, inputs: str | Sequence[str], *, input_type: EmbedInputType, settings: EmbeddingSettings | None = None
    ) -> EmbeddingResult:
        EMBEDDED.append(1 if isinstance(inputs, str) else len(inputs))
        return await super().embed(inputs, input_type=input_type, settings=settings)


def _agent(name: str, recall: ConversationRecall[RecallDeps]) -> Agent[RecallDeps, str]:
    return Agent(
        FunctionModel(_recall_then_answer, model_name=name),
        name=name,
        deps_type=RecallDeps,
        tools=[get_weather],
        capabilities=[recall, TemporalDurability()],
    )


meaning_agent = _agent('meaning', ConversationRecall(embedder=Embedder(CountingModel())))
"""Embeds with its own embedder (the capability's)."""

words_agent = _agent('words', ConversationRecall())
"""Embeds with the worker's embedder, if the worker has one."""

local_agent = _agent('local', ConversationRecall(embedder=LOCAL_MODEL))
"""Names the local model on its capability alone: the one place a user names it."""
