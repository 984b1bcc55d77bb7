"""Which embedder a write or a search uses: the one given to the capability, else the worker's.

An embedder is named the pydantic-ai way (`'openai:text-embedding-3-small'`, an `EmbeddingModel`, an
`Embedder`), plus `LOCAL_MODEL` for the offline model of the `semantic` extra. Building an `Embedder`
creates no client and loads no weights (pydantic-ai defers that to the first call), so a capability
of a module-level agent can hold one in the workflow sandbox; it is only ever called in activities.

As with the store (`_store_provider`), the worker's `RecallPlugin(embedder=...)` is put in a
`ContextVar` around each activity its worker runs, so capabilities built without one use it.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TypeAlias

from pydantic_ai.embeddings import Embedder, EmbeddingModel

from ._local import LOCAL_MODEL, WordLlamaEmbeddingModel

__all__ = ('EmbedderSource', 'as_embedder', 'embedder_for', 'model_name_of')

EmbedderSource: TypeAlias = Embedder | EmbeddingModel | str
"""An `Embedder`, an `EmbeddingModel`, or a model name (`'provider:model'`, or `LOCAL_MODEL`)."""


def as_embedder(source: EmbedderSource | None) -> Embedder | None:
    """`source` as an `Embedder` (`None` stays `None`: recall is BM25 only)."""
    if source is None or isinstance(source, Embedder):
        return source
    if isinstance(source, str) and source.strip() == LOCAL_MODEL:
        return Embedder(WordLlamaEmbeddingModel())
    return Embedder(source)


def model_name_of(embedder: Embedder) -> str:
    """The name vectors are recorded under in the store: `system:model`, as pydantic-ai names the model."""
    model = embedder.model
    if isinstance(model, str):
        return model.strip()
    return f'{model.system}:{model.model_name}'


_WORKER_EMBEDDER: ContextVar[Embedder | None] = ContextVar('temporal_recall_worker_embedder', default=None)
"""The running activity's worker's embedder; set by `RecallPlugin`'s activity interceptor only."""


def embedder_for(explicit: Embedder | None) -> Embedder | None:
    """`explicit` when the capability was given an embedder, else the embedder of this activity's worker, if any."""
    return explicit if explicit is not None else _WORKER_EMBEDDER.get()
