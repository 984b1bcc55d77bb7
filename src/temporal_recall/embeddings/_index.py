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

`embedded_save` does the same for what pydantic-ai's `ConversationStore.save` (and so its UI adapters'
`conversation_store=`) writes: the new entries' documents, with the embedder the store was opened with
(`open_store(..., embedder=...)`), else with the model the store's vectors were made with, built by name
(`embedder_named`), so a store that holds vectors gets them on every write. A save that writes no entry
reads nothing; one whose documents all have vectors embeds nothing. A model the save was not given
explicitly never fails it: if it cannot be built or does not answer, the entries are saved without
vectors and a warning says so (`recall reindex --embeddings` fills them).
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
