"""Embedding a step's documents where the step is written: the one function the write path calls.

`embedded_append` wraps a step's append (`PersistingModel`'s in-activity writes and `store_step`):

1. Before the append, the step's documents (`document_texts`: one per speaker of each message, as
   the BM25 index has them) whose content the tenant has no vector for are embedded. If the model
   fails, nothing is written at all: the error (`EmbeddingUnavailable`) fails the activity and
   Temporal retries it, or a plain `agent.run` raises it.
2. The append runs as without an embedder: the same transaction, the same locks, never waiting on
   the model.
3. The vectors are stored in a short transaction of their own. A retried step finds them stored
   (or stores them then), and a content said again is never embedded twice.

Without an embedder it is the append alone: no read, no write, nothing imported. A store whose
vectors came from another model keeps them unmixed: the step is written without vectors, a warning
says why, and searches by meaning refuse with `EmbeddingMismatch` until `recall reindex --embeddings`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray
from pydantic_ai.embeddings import Embedder

from ..content import content_hash
from ..errors import EmbeddingMismatch
from ..search import document_texts
from ._source import model_name_of
from ._vectors import embed_texts, quantize

if TYPE_CHECKING:
    from ..store.protocol import AppendRequest, AppendResult, VectorIndex

__all__ = ('embedded_append', 'reembed_store')

log = logging.getLogger('temporal_recall.embeddings')


def _documents(request: AppendRequest) -> dict[tuple[str, str], str]:
    """The request's documents by `(content_hash, role)`: what the index makes of its messages."""
    found: dict[tuple[str, str], str] = {}
    hashes = request.content_hashes
    for index, message in enumerate(request.messages):
        if request.summary is not None and request.summary(message):
            continue  # stored marked as a summary: never indexed, so never embedded
        content = content_hash(message) if hashes is None else hashes[index]
        for role, text in document_texts(message):
            found.setdefault((content, role), text)
    return found


async def embedded_append(
    store: VectorIndex,
    embedder: Embedder | None,
    request: AppendRequest,
    append: Callable[[], Awaitable[AppendResult]],
) -> AppendResult:
    """`append()`, with the vectors of `request`'s new documents embedded before it and stored after it.

    Raises:
        EmbeddingUnavailable: the model failed; nothing was written (retry the whole call).
    """
    if embedder is None:
        return await append()
    documents = _documents(request)
    if not documents:
        return await append()
    space, missing = await store.vectors_missing(request.scope, list(documents))
    model = model_name_of(embedder)
    if space is not None and space[0] != model:
        log.warning('%s The step is stored without vectors.', EmbeddingMismatch.between(space, model))
        return await append()
    if not missing:
        return await append()
    embedded = await embed_texts(embedder, [documents[key] for key in missing], input_type='document')
    result = await append()
    if not result.fenced:
        components, scales = quantize(embedded.vectors)
        try:
            await store.add_vectors(request.scope, embedded.model, components, scales, missing)
        except EmbeddingMismatch as error:  # another process changed the store's model meanwhile
            log.warning('%s The step is stored without vectors.', error)
    return result


async def reembed_store(store: Any, embedder: Embedder, progress: Callable[[int, int], None] | None = None) -> int:
    """`recall reindex --embeddings`: every document of `store` embedded with `embedder` (another model's
    vectors are replaced), with `progress(done, total)`; returns how many documents were embedded."""

    async def embed(texts: Sequence[str]) -> tuple[NDArray[np.int8], NDArray[np.float32]]:
        return quantize((await embed_texts(embedder, texts, input_type='document')).vectors)

    return await store.reembed(model_name_of(embedder), embed, progress)
