"""Embedding a write's documents around the write: the one place the write paths call.

`embedded_append` embeds the documents of a step the tenant has no vector for before its append (a
model failure writes nothing, and the activity retries), runs the append unchanged, never waiting on
the model, and stores the vectors after it in a transaction of their own. `embedded_save` does the
same for pydantic-ai's `ConversationStore.save`, but never fails a save over a model it was not given.
docs/design/semantic.md ("Where embeddings are computed") has the details.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray
from pydantic_ai.embeddings import Embedder
from pydantic_ai.messages import ModelMessage

from ..content import content_hash
from ..errors import ConfigurationError, EmbeddingMismatch, EmbeddingUnavailable
from ..text._documents import document_texts
from ._protocol import DocumentKey, Fenced, StepDocuments, VectorWrites
from ._source import embedder_named, model_name_of, store_embedder
from ._vectors import embed_texts, quantize

__all__ = ('embedded_append', 'embedded_save', 'reembed_store')

log = logging.getLogger('temporal_recall.embeddings')

_Written = TypeVar('_Written')
_Appended = TypeVar('_Appended', bound=Fenced)


def _documents(request: StepDocuments) -> dict[DocumentKey, str]:
    """The request's documents by `(content_hash, role)`: what the index makes of its messages."""
    found: dict[DocumentKey, str] = {}
    hashes = request.content_hashes
    for index, message in enumerate(request.messages):
        if request.summary is not None and request.summary(message):
            continue  # stored marked as a summary: never indexed, so never embedded
        content = content_hash(message) if hashes is None else hashes[index]
        for role, text in document_texts(message):
            found.setdefault((content, role), text)
    return found


async def embedded_append(
    store: VectorWrites,
    embedder: Embedder | None,
    request: StepDocuments,
    append: Callable[[], Awaitable[_Appended]],
) -> _Appended:
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
    return await _embedded(
        store, embedder, request.scope, documents, space, missing, append, lambda result: not result.fenced, 'step'
    )


async def embedded_save(
    store: VectorWrites, scope: str | None, messages: Sequence[ModelMessage], write: Callable[[], Awaitable[None]]
) -> None:
    """`write()` (a `write_record` of `messages` under `scope`), with the vectors of their new documents.

    The embedder is the store's own (`open_store(..., embedder=...)`), else the model its vectors were made
    with, built by name; without either (a store that never held a vector), the write alone.

    Raises:
        EmbeddingUnavailable: the store's own embedder failed; nothing was written.
    """
    embedder = store_embedder(store)
    if embedder is None:
        # Without an embedder of its own, a store that never held a vector costs one read of its (absent) model.
        space, _ = await store.vectors_missing(scope, [])
        if space is None:
            return await write()
    documents: dict[DocumentKey, str] = {}
    for message in messages:
        content = content_hash(message)
        for role, text in document_texts(message):
            documents.setdefault((content, role), text)
    if not documents:
        return await write()
    space, missing = await store.vectors_missing(scope, list(documents))
    if embedder is not None:
        return await _embedded(store, embedder, scope, documents, space, missing, write, lambda _: True, 'save')
    if space is None or not missing:
        return await write()
    try:
        embedder = embedder_named(space[0])
        embedded = await embed_texts(embedder, [documents[key] for key in missing], input_type='document')
    except (ConfigurationError, EmbeddingUnavailable) as error:
        log.warning(
            "%s The save is stored without vectors of the store's model; configure it where the store is "
            'opened (`open_store(..., embedder=...)`), or fill them with `recall reindex --embeddings`.',
            error,
        )
        return await write()
    await write()
    await _store_vectors(store, scope, embedded.model, embedded.vectors, missing, 'save')


async def _embedded(
    store: VectorWrites,
    embedder: Embedder,
    scope: str | None,
    documents: dict[DocumentKey, str],
    space: tuple[str, int] | None,
    missing: list[DocumentKey],
    write: Callable[[], Awaitable[_Written]],
    written: Callable[[_Written], bool],
    what: str,
) -> _Written:
    """Embed the `missing` documents, `write()`, then store their vectors if `written(result)`."""
    model = model_name_of(embedder)
    if space is not None and space[0] != model:
        log.warning('%s The %s is stored without vectors.', EmbeddingMismatch.between(space, model), what)
        return await write()
    if not missing:
        return await write()
    embedded = await embed_texts(embedder, [documents[key] for key in missing], input_type='document')
    result = await write()
    if written(result):
        await _store_vectors(store, scope, embedded.model, embedded.vectors, missing, what)
    return result


async def _store_vectors(
    store: VectorWrites, scope: str | None, model: str, vectors: NDArray[np.float32], keys: list[DocumentKey], what: str
) -> None:
    components, scales = quantize(vectors)
    try:
        await store.add_vectors(scope, model, components, scales, keys)
    except EmbeddingMismatch as error:  # another process changed the store's model meanwhile
        log.warning('%s The %s is stored without vectors.', error, what)


async def reembed_store(store: Any, embedder: Embedder, progress: Callable[[int, int], None] | None = None) -> int:
    """`recall reindex --embeddings`: every document of `store` embedded with `embedder` (another model's
    vectors are replaced), with `progress(done, total)`; returns how many documents were embedded."""

    async def embed(texts: Sequence[str]) -> tuple[NDArray[np.int8], NDArray[np.float32]]:
        return quantize((await embed_texts(embedder, texts, input_type='document')).vectors)

    return await store.reembed(model_name_of(embedder), embed, progress)
