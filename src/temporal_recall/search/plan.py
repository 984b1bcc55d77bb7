"""Runs one search over a store: the orchestration shared by the activity, the model tool, the CLI and the API.

It resolves the request's target and mode, reads the target's stats and posting lists in one store call
(`IndexReader.target_postings`), ranks them (`_bm25_arrays`; by meaning, `_meaning`) and fills the page
(`_paging`). The backend only fetches rows, so SQLite and PostgreSQL answer alike by construction. It
awaits the store and records metrics: activity-side code imports it, workflows never do.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from pydantic_ai.embeddings import Embedder

from temporal_recall._metrics import record_search
from temporal_recall._renamed import renamed_names
from temporal_recall._search_terms import SearchMode
from temporal_recall._tracing import SEARCH, note, span
from temporal_recall.embeddings._source import (
    CONFIGURE_AN_EMBEDDER,
    EmbedderSource,
    as_embedder,
    embedder_named,
    model_name_of,
    store_embedder,
)
from temporal_recall.errors import ConfigurationError, InvalidSearchParameters, UnknownConversation
from temporal_recall.models import SearchRequest, SearchResult
from temporal_recall.search._assemble import build_hits
from temporal_recall.search._bm25 import BM25Parameters, ScoredDocument
from temporal_recall.search._bm25_arrays import rank_columns
from temporal_recall.search._meaning import search_by_meaning
from temporal_recall.search._options import SearchOptions
from temporal_recall.search._paging import Ranking, fill_page
from temporal_recall.search._pruned import TierPruning
from temporal_recall.search._query import Query, parse_query
from temporal_recall.store.protocol import (
    IndexReader,
    IndexStats,
    PostingColumns,
    SearchTarget,
    TieredIndex,
    VectorIndex,
)

__all__ = ('search_index', 'search_mode', 'target_of')


def target_of(request: SearchRequest) -> SearchTarget:
    """The trusted target of a request, refusing an ambiguous one instead of widening it."""
    if request.all_conversations:
        if request.conversation_id is not None:
            raise InvalidSearchParameters(
                'Pass either `conversation_id` or `all_conversations=True`, not both: '
                'an explicit conversation narrows the search, `all_conversations` widens it.'
            )
        return SearchTarget(
            scope=request.scope,
            conversation_id=None,
            run_id=request.run_id,
            role=request.role,
            include_superseded=request.include_superseded,
        )
    if not request.conversation_id:
        raise InvalidSearchParameters(
            "No conversation id to search: pass the calling conversation's id, or `all_conversations=True` "
            'for a store isolated to one principal. Nothing was searched.'
        )
    return SearchTarget(
        scope=request.scope,
        conversation_id=request.conversation_id,
        run_id=request.run_id,
        role=request.role,
        include_superseded=request.include_superseded,
    )


async def search_index(
    reader: IndexReader, request: SearchRequest, *, embedder: EmbedderSource | None = None
) -> SearchResult:
    """Run `request` against the index; inside an activity, its latency and hits go to the worker's metrics.

    With an `embedder` (the one the store's vectors were made with), or one the store was opened with
    (`open_store(..., embedder=...)`), `request.mode` may ask for meaning: `semantic` or `hybrid`, which is
    then the default (`search._meaning`). Without either, the default is BM25, and a search that asks for
    meaning embeds its query with the model the store's vectors were made with, built from the name the
    store records (`embeddings.embedder_named`).

    Raises:
        InvalidQuery: the query is empty or too large.
        InvalidSearchParameters: limit, context or BM25 parameters out of range, no target, or a search
            by meaning without an embedder in a store that holds no vectors, or whose vectors' model
            cannot be used here (its package or its key is missing: the message says which); the message
            names every way to configure an embedder.
        EmbeddingUnavailable: the embedding model failed on the query (retryable).
        EmbeddingMismatch: the store's vectors were made by another model than `embedder`.
        UnknownConversation: the conversation does not exist in the request's scope (the same
            answer whether it does not exist at all or belongs to another scope).
    """
    started = time.perf_counter()
    with span(
        SEARCH,
        conversation_id=request.conversation_id,
        all_conversations=request.all_conversations,
        scoped=request.scope is not None,
        run_id=request.run_id,
        role=request.role,
        limit=request.limit,
        context_lines=request.context_lines,
        query_chars=len(request.query),
    ) as current:
        result = await _search(reader, request, as_embedder(embedder) or store_embedder(reader))
        note(current, hits=len(result.hits), searched_documents=result.searched_documents, mode=result.mode)
    record_search(time.perf_counter() - started, len(result.hits))
    return result


def search_mode(asked: SearchMode | None, embedder: Embedder | None) -> SearchMode:
    """The mode a search runs in: as asked, or hybrid where there is an embedder, else bm25."""
    if asked is None:
        return 'bm25' if embedder is None else 'hybrid'
    if asked != 'bm25' and embedder is None:
        raise InvalidSearchParameters(
            f"mode='{asked}' searches by meaning, which needs an embedder: none was given, and the store holds no "
            f'vectors whose model could embed the query. Configure one ({CONFIGURE_AN_EMBEDDER}), '
            "or search with mode='bm25'."
        )
    return asked


async def _stored_model(reader: IndexReader, request: SearchRequest) -> Embedder | None:
    """The embedder of the model the store's vectors were made with, built by name; `None` without vectors.

    Raises:
        InvalidSearchParameters: the store records a model that cannot be built here (see `_unusable`).
    """
    if not isinstance(reader, VectorIndex):
        return None
    space, _ = await reader.vectors_missing(request.scope, [])
    if space is None:
        return None
    try:
        return embedder_named(space[0])
    except ConfigurationError as error:
        raise _unusable(space[0], request, error) from error


def _unusable(model: str, request: SearchRequest, error: ConfigurationError) -> InvalidSearchParameters:
    """Meaning asked for without an embedder, in a store whose model this process cannot use: refused as a
    search without an embedder is, saying what failed and where to configure one."""
    return InvalidSearchParameters(
        f"mode='{request.mode}' searches by meaning, and no embedder was given, so the query is embedded with the "
        f"model the store's vectors were made with, {model!r}, which this process cannot use: {error} Configure "
        f"an embedder ({CONFIGURE_AN_EMBEDDER}), or search with mode='bm25'."
    )


async def _search(reader: IndexReader, request: SearchRequest, embedder: Embedder | None) -> SearchResult:
    query = parse_query(request.query)
    options = SearchOptions(
        limit=request.limit,
        context_lines=request.context_lines,
        parameters=BM25Parameters(k1=request.k1, b=request.b),
    )
    target = target_of(request)
    if embedder is None and request.mode in ('semantic', 'hybrid'):
        # Meaning asked for, and no embedder configured anywhere: the store's own model, by the name it records.
        stored = await _stored_model(reader, request)
        if stored is not None:
            try:
                return await _search_with(reader, request, stored, query, options, target)
            except ConfigurationError as error:  # the model cannot load here (a broken install)
                raise _unusable(model_name_of(stored), request, error) from error
    return await _search_with(reader, request, embedder, query, options, target)


async def _search_with(
    reader: IndexReader,
    request: SearchRequest,
    embedder: Embedder | None,
    query: Query,
    options: SearchOptions,
    target: SearchTarget,
) -> SearchResult:
    mode = search_mode(request.mode, embedder)
    if mode == 'semantic':
        assert embedder is not None
        return await search_by_meaning(
            reader, request, embedder=embedder, mode=mode, target=target, query=query, options=options, lexical=None
        )
    if mode == 'bm25' and isinstance(reader, TieredIndex) and _spans_tenant(target):
        return await _search_tiers(reader, reader, request, query, options, target)
    found = await reader.target_postings(target, query.terms)
    if found is None:
        raise UnknownConversation(target.conversation_id or '')
    stats = found.stats
    frequencies, matched = await target_frequencies(reader, target, found.columns, query.terms)
    if mode == 'hybrid':
        assert embedder is not None
        columns = found.columns

        def lexical(depth: int) -> list[ScoredDocument]:
            return rank_columns(stats, columns, frequencies, query.terms, options.parameters, depth)

        return await search_by_meaning(
            reader,
            request,
            embedder=embedder,
            mode=mode,
            target=target,
            query=query,
            options=options,
            lexical=lexical,
            lexical_documents=stats.document_count,
        )

    async def lexical_page(fetch: int) -> tuple[list[ScoredDocument], bool]:
        ranked = rank_columns(stats, found.columns, frequencies, query.terms, options.parameters, fetch)
        return ranked, len(ranked) < fetch or fetch >= matched

    return await _lexical_result(reader, request, query, options, target, lexical_page, lambda: stats)


def _spans_tenant(target: SearchTarget) -> bool:
    """Whether `target` is its whole tenant: what the top tiers of long lists serve (`TieredIndex`)."""
    return target.conversation_id is None and target.run_id is None and target.role is None


async def _search_tiers(
    reader: IndexReader,
    tiers: TieredIndex,
    request: SearchRequest,
    query: Query,
    options: SearchOptions,
    target: SearchTarget,
) -> SearchResult:
    """A scope-wide BM25 search that reads the top tiers of long lists and only the postings that can still
    change its page (`_pruned`), each time the page is widened: the exhaustive ranking's hits and scores."""
    searched = IndexStats(document_count=0, total_length=0)

    async def lexical_page(fetch: int) -> tuple[list[ScoredDocument], bool]:
        nonlocal searched
        pruning = TierPruning(query.terms, options.parameters, fetch)
        read = await tiers.tiered_postings(target, query.terms, pruning.lookups)
        assert read is not None  # A scope-wide target always reads.
        searched = read.stats
        ranked = pruning.rank(read)
        return ranked, len(ranked) < fetch or fetch >= sum(read.frequencies.values())

    return await _lexical_result(reader, request, query, options, target, lexical_page, lambda: searched)


async def _lexical_result(
    reader: IndexReader,
    request: SearchRequest,
    query: Query,
    options: SearchOptions,
    target: SearchTarget,
    ranking: Ranking,
    searched: Callable[[], IndexStats],
) -> SearchResult:
    """A BM25 search's result: the page of `ranking` (`fill_page`) as hits, with the counters `searched`
    gives once the page is filled (a pruned ranking reads them with each widening)."""
    ranked, rows = await fill_page(reader, target, ranking, options, exclude_run_id=request.exclude_run_id)
    hits = build_hits(ranked, rows, query.terms, context_lines=options.context_lines)
    return SearchResult(
        query=request.query,
        hits=hits,
        searched_documents=searched().document_count,
        truncated_query=query.truncated,
    )


async def target_frequencies(
    reader: IndexReader, target: SearchTarget, columns: dict[str, PostingColumns], terms: Sequence[str]
) -> tuple[dict[str, int], int]:
    """Each term's document frequency as `rank` takes it, and how many postings matched (an upper bound of
    the matching documents).

    A term's frequency is its list's length over the target. A role filter is ranked with the
    frequencies of the whole target instead: it narrows the hits, and the idf of the whole
    conversation (or scope) keeps every hit's score what it is without the filter.
    """
    frequencies = {term: len(found.doc_ids) for term, found in columns.items()}
    matched = sum(frequencies.values())
    if target.role is not None:
        whole = replace(target, role=None)
        unfiltered = await reader.document_frequencies(whole, terms)
        if unfiltered is None:
            read = await reader.target_postings(whole, terms)
            unfiltered = {} if read is None else {term: len(found.doc_ids) for term, found in read.columns.items()}
        frequencies = {term: unfiltered.get(term, count) for term, count in frequencies.items()}
    return frequencies, matched


__getattr__ = renamed_names(__name__, {'search_history': 'search_index'}, lambda new: globals()[new])
"""The names renamed in this release, for one more release: each access warns."""
