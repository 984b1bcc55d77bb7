"""A search by meaning (`mode='semantic'`) or by words and meaning fused (`mode='hybrid'`).

The query is embedded in the search's own process with the model the store's vectors were made with;
the nearest vectors come from the same target as BM25's postings and the page's rows from
`IndexReader.documents`, so a hit has a BM25 hit's shape and isolation. A hybrid search keeps a
document found by meaning alone only above the meaning floor (docs/design/semantic.md). Activity-side: it
awaits the store and the embedding model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from pydantic_ai.embeddings import Embedder

from temporal_recall._search_terms import Arm, SearchMode
from temporal_recall.embeddings._vectors import embed_texts
from temporal_recall.errors import ConfigurationError, UnknownConversation
from temporal_recall.models import SearchRequest, SearchResult
from temporal_recall.search._assemble import build_hits
from temporal_recall.search._bm25 import ScoredDocument
from temporal_recall.search._fusion import Fused, above_floor, fuse
from temporal_recall.search._options import SearchOptions
from temporal_recall.search._paging import fill_page
from temporal_recall.search._query import Query
from temporal_recall.store.protocol import IndexReader, SearchTarget, VectorIndex

__all__ = ('ARM_DEPTH', 'FUSION', 'search_by_meaning')

ARM_DEPTH = 50
"""How many documents each ranking contributes to a fusion, at least: deep enough that a document
ranked well by one ranking and poorly by the other is still fused (bench/semantic)."""

FUSION: Callable[[Mapping[Arm, Sequence[ScoredDocument]]], Fused] = fuse
"""How a hybrid search fuses its two rankings (`search._fusion`); bench/semantic swaps it to measure another."""


async def search_by_meaning(
    reader: IndexReader,
    request: SearchRequest,
    *,
    embedder: Embedder,
    mode: SearchMode,
    target: SearchTarget,
    query: Query,
    options: SearchOptions,
    lexical: Callable[[int], list[ScoredDocument]] | None,
    lexical_documents: int = 0,
) -> SearchResult:
    """Rank `target`'s documents by meaning, fused with `lexical` (the BM25 ranking, given its depth) when
    `mode` is hybrid (by `FUSION`, then `above_floor`); then fetch the page's rows as a BM25 search does.

    Raises:
        UnknownConversation: the target's conversation (or run) does not exist in its scope.
        EmbeddingUnavailable: the model failed to embed the query (retryable).
        EmbeddingMismatch: the store's vectors are another model's.
    """
    if not isinstance(reader, VectorIndex):
        raise ConfigurationError(f'{type(reader).__name__} holds no vectors: search it with mode="bm25".')
    embedded = await embed_texts(embedder, [request.query], input_type='query')
    arms: dict[int, list[Arm]] = {}
    held = 0
    best: float | None = None

    async def showable_best(near: list[tuple[int, float]]) -> float:
        nonlocal best
        if best is None:
            best = await _showable_best(reader, target, near, request.exclude_run_id)
        return 0.0 if best is None else best

    async def fused_page(fetch: int) -> tuple[list[ScoredDocument], bool]:
        nonlocal arms, held
        depth = max(fetch, ARM_DEPTH)
        found = await reader.nearest(target, embedded.model, embedded.vectors[0], depth)
        if found is None:
            raise UnknownConversation(target.conversation_id or '')
        near, held = found
        rankings: dict[Arm, Sequence[ScoredDocument]] = {}
        if lexical is not None:
            rankings['bm25'] = lexical(depth)
        rankings['semantic'] = [ScoredDocument(doc_id, score) for doc_id, score in near]
        if mode == 'hybrid':
            fused, arms = above_floor(FUSION(rankings), rankings['semantic'], await showable_best(near))
        else:
            alone: list[Arm] = ['semantic']
            fused, arms = list(rankings['semantic']), {doc_id: alone for doc_id, _ in near}
        return fused, len(fused) <= fetch

    ranked, rows = await fill_page(reader, target, fused_page, options, exclude_run_id=request.exclude_run_id)
    hits = build_hits(ranked, rows, query.terms, context_lines=options.context_lines, found_by=arms)
    return SearchResult(
        query=request.query,
        hits=hits,
        searched_documents=max(lexical_documents, held),
        truncated_query=query.truncated and lexical is not None,
        mode=mode,
    )


async def _showable_best(
    reader: IndexReader, target: SearchTarget, near: list[tuple[int, float]], exclude_run_id: str | None
) -> float | None:
    """The best cosine of `near` (best first) that a page can show: of the first document with an
    occurrence outside `exclude_run_id`; `None` when there is none among them."""
    if not near:
        return None
    if exclude_run_id is None:
        return near[0][1]
    cosines = dict(near)
    rows = await reader.documents(target, list(cosines), limit=1, exclude_run_id=exclude_run_id)
    return cosines[rows[0].doc_id] if rows else None
