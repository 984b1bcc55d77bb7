"""Which embedder a write or a search uses: the capability's, else the worker's, else the store's.

Embedders are named the pydantic-ai way, plus `LOCAL_MODEL`; building one creates no client and loads
no weights, so a module-level agent's capability can hold one in the workflow sandbox. The worker's
embedder reaches capabilities through a `ContextVar` set around each activity, and a search with none
falls back to the model the store's vectors were made with, built by name (docs/design/semantic.md).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TypeAlias

from pydantic_ai.embeddings import Embedder, EmbeddingModel

from ..errors import ConfigurationError
from ._local import LOCAL_MODEL, WordLlamaEmbeddingModel

__all__ = (
    'CONFIGURE_AN_EMBEDDER',
    'EmbedderSource',
    'as_embedder',
    'embedder_for',
    'embedder_named',
    'model_name_of',
    'store_embedder',
)

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


CONFIGURE_AN_EMBEDDER = (
    "`ConversationRecall(embedder=...)` on the agent (its workflows' searches use it too), "
    '`RecallPlugin(embedder=...)` on the worker, `open_store(..., embedder=...)`, '
    '`search_messages(..., embedder=...)`, `create_app(..., embedder=...)` for the HTTP API, '
    '`recall search --embedder NAME` (and `recall serve --embedder NAME`), or TEMPORAL_RECALL_EMBEDDER '
    'for the worker, the CLI and the API'
)
"""Every place an embedder can be configured, for the errors that find none."""


def store_embedder(store: object) -> Embedder | None:
    """The embedder `store` was opened with (`open_store(..., embedder=...)`), if any."""
    found = getattr(store, 'embedder', None)
    return found if isinstance(found, Embedder) else None


def embedder_for(explicit: Embedder | None, store: object = None) -> Embedder | None:
    """`explicit` when the capability was given an embedder, else the embedder of this activity's worker,
    else the one `store` was opened with, if any."""
    if explicit is not None:
        return explicit
    worker = _WORKER_EMBEDDER.get()
    return worker if worker is not None else store_embedder(store)


def embedder_named(name: str) -> Embedder:
    """The embedder of the model `name` (as the store records it: `model_name_of`), built now.

    The local model only checks that wordllama is installed (its weights load on the first embedding);
    a hosted model gets its provider as pydantic-ai builds it from a name, its key read from the
    environment (`OPENAI_API_KEY`, ...), so a missing key or package fails here, not at the first query.

    Raises:
        ConfigurationError: the model cannot be built in this process; the message says why.
    """
    try:
        if name.strip() == LOCAL_MODEL:
            model = WordLlamaEmbeddingModel()
            model.check_installed()
            return Embedder(model)
        return Embedder(name, defer_model_check=False)
    except ConfigurationError:
        raise
    except Exception as error:  # a missing package or key, an unknown provider: pydantic-ai's own words
        raise ConfigurationError(
            f'The embedding model {name!r} cannot be built here: {type(error).__name__}: {str(error)[:300]}'
        ) from error
