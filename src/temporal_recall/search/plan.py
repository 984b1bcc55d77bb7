"""The search plan: one search over the persisted history, shared by the activity, the model tool, the CLI and the API.

It reads the target's stats and posting lists as arrays in one store call (`IndexReader.target_postings`:
a search narrowed to a conversation, a run or a role reads the postings of its documents, a
scope-wide search reads whole lists), scores them (`_rank_columns`, the same arithmetic as the pure
`rank`, bit for bit) and reads the page's documents in a second call. The backend only fetches rows,
so SQLite and PostgreSQL give the same answers by construction.

This module awaits the store and records metrics, so `temporal_recall.search` does not import it:
the package stays pure and safe in the workflow sandbox, and activity-side code imports the plan
from here.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, cast

import numpy as np
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
from temporal_recall.search._assemble import build_hits, fill_page
from temporal_recall.search._bm25 import (
    BM25Parameters,
    ScoredDocument,
    term_idf,
)
from temporal_recall.search._meaning import search_by_meaning
from temporal_recall.search._options import SearchOptions
from temporal_recall.search._query import Query, parse_query
from temporal_recall.store.protocol import IndexReader, IndexStats, PostingColumns, SearchTarget, VectorIndex

if TYPE_CHECKING:
    from numpy.typing import NDArray

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
    found = await reader.target_postings(target, query.terms)
    if found is None:
        raise UnknownConversation(target.conversation_id or '')
    stats = found.stats
    frequencies, matched = await _frequencies(reader, target, found.columns, query.terms)
    if mode == 'hybrid':
        assert embedder is not None
        columns = found.columns

        def lexical(depth: int) -> list[ScoredDocument]:
            return _rank_columns(stats, columns, frequencies, query.terms, options.parameters, depth)

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
        ranked = _rank_columns(stats, found.columns, frequencies, query.terms, options.parameters, fetch)
        return ranked, len(ranked) < fetch or fetch >= matched

    ranked, rows = await fill_page(reader, target, lexical_page, options, exclude_run_id=request.exclude_run_id)
    hits = build_hits(ranked, rows, query.terms, context_lines=options.context_lines)
    return SearchResult(
        query=request.query,
        hits=hits,
        searched_documents=stats.document_count,
        truncated_query=query.truncated,
    )


async def _frequencies(
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


def _best(
    weighted: Sequence[tuple[NDArray[np.int64], NDArray[np.float64]]], limit: int
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Each document's score, its weights added term by term in query order, and of those the
    documents that can be on a page of `limit`: `(doc_ids, scores)`, every document scoring at least
    the `limit`-th best score (ties included), in no particular order.

    Each weight is added once, in term order, starting from 0.0 (which `summed`'s first copy equals),
    exact because a term holds a document once. Where the ids are dense (one tenant's documents, the
    usual case) each term's weights go into an array indexed by id with `bincount` (one pass; a
    document the term lacks gets 0.0, which adds nothing), and the arrays are added in term order;
    otherwise the sums go into the sorted union of the ids. Measured on the benchmark's 100k store,
    common-word queries (200,000 postings): 0.44 ms for the sums and the selection, against 1.7 ms
    for a fancy-indexed addition per term followed by `np.partition` over every held document.
    """
    low = min(int(docs[0]) for docs, _ in weighted)
    span = max(int(docs[-1]) for docs, _ in weighted) - low + 1
    if span > 4 * sum(len(docs) for docs, _ in weighted):
        doc_ids = np.unique(np.concatenate([docs for docs, _ in weighted]))
        scores = np.zeros(len(doc_ids))
        for docs, weights in weighted:
            at = np.searchsorted(doc_ids, docs)
            scores[at] = scores[at] + weights
        return _at_least_kth(doc_ids, scores, limit)
    # With weights, `bincount` sums float64 (numpy's stubs type every result as integers).
    dense = cast('NDArray[np.float64]', np.bincount(weighted[0][0] - low, weighted[0][1], minlength=span))
    for docs, weights in weighted[1:]:
        np.add(dense, np.bincount(docs - low, weights, minlength=span), out=dense)
    # Every weight is positive, so a held document's sum is too. The `limit`-th best of every 16th
    # document is at most the page's last score: only documents reaching it are candidates.
    sample = dense[::16]
    floor = np.partition(sample, len(sample) - limit)[len(sample) - limit] if len(sample) > limit else 0.0
    held = np.flatnonzero(dense >= floor) if floor > 0 else np.flatnonzero(dense)
    return _at_least_kth(held + low, dense[held], limit)


def _at_least_kth(
    doc_ids: NDArray[np.int64], scores: NDArray[np.float64], limit: int
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """The documents scoring at least the `limit`-th best score."""
    if len(scores) <= limit:
        return doc_ids, scores
    kth = np.partition(scores, len(scores) - limit)[len(scores) - limit]
    chosen = np.flatnonzero(scores >= kth)
    return doc_ids[chosen], scores[chosen]


def _weights(
    frequencies: NDArray[np.uint32], lengths: NDArray[np.uint32], idf: float, k1: float, b: float, average_length: float
) -> NDArray[np.float64]:
    """`term_weights`' formula over arrays: `idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))`.

    The same operations on the same operands in the same grouping, so each weight is bitwise the one
    `term_weights` computes (IEEE addition and multiplication are commutative, which is all the operand
    order written here changes). Computed in place in two arrays: a common term of a 100k store has
    100k postings, and each temporary array of that size costs page faults as well as a pass.
    """
    tf = frequencies.astype(np.float64)
    denominator = lengths.astype(np.float64)
    if average_length > 0:
        np.multiply(denominator, b, out=denominator)  # b * dl
        np.divide(denominator, average_length, out=denominator)  # ... / avgdl
        np.add(denominator, 1 - b, out=denominator)  # (1 - b) + ...
    else:
        denominator.fill((1 - b) + 0.0)
    np.multiply(denominator, k1, out=denominator)  # k1 * norm
    np.add(denominator, tf, out=denominator)  # tf + ...
    np.multiply(tf, idf, out=tf)  # idf * tf
    np.multiply(tf, k1 + 1, out=tf)  # ... * (k1 + 1)
    return np.divide(tf, denominator, out=tf)


def _rank_columns(
    stats: IndexStats,
    columns: dict[str, PostingColumns],
    frequencies: dict[str, int],
    terms: Sequence[str],
    parameters: BM25Parameters,
    limit: int,
) -> list[ScoredDocument]:
    """The exact BM25 top-k of posting lists read as arrays (`IndexReader.target_postings`): `rank`'s
    answer, at C speed. `frequencies` holds each term of `columns`' document frequency over the target.

    Used for every search. A scope-wide search over a common term reads a list
    that holds most of the tenant, and the block bounds (`_blocks`) cannot skip much
    of it: measured on the benchmark's 100k corpus, the documents whose bound (the sum of the best
    weights of the blocks around them) reaches the page's tenth score are 7% to 97% of those holding
    any query term, 68% at the median, because in every block of 64 some document weighs near the
    term's best. Scoring every posting as arrays costs less than deciding which to skip. The arithmetic is `rank`'s, in
    its order: each weight is `term_weights`' formula evaluated operation by operation in IEEE
    doubles, and a document's weights are added term by term in query order starting from the
    first, so every score is bitwise the one `rank` computes from the same postings, and the order
    (score, then smaller `doc_id`) is the same.
    """
    if stats.document_count <= 0:
        return []  # As `rank`: an empty target (or one emptied since its stats were read) ranks nothing.
    average_length = stats.total_length / stats.document_count
    k1, b = parameters.k1, parameters.b
    weighted: list[tuple[NDArray[np.int64], NDArray[np.float64]]] = []
    for term in dict.fromkeys(terms):  # Each distinct term once, in query order, as `rank` adds them.
        found = columns.get(term)
        if found is None or not len(found.doc_ids):
            continue
        doc_ids, tf, dl = found
        if not tf.all():  # A stored frequency is at least 1; `term_weights` skips 0 all the same.
            keep = tf > 0
            doc_ids, tf, dl = doc_ids[keep], tf[keep], dl[keep]
        weighted.append(
            (doc_ids, _weights(tf, dl, term_idf(stats.document_count, frequencies[term]), k1, b, average_length))
        )
    if not weighted:
        return []
    doc_ids, scores = _best(weighted, limit)
    best = np.lexsort((doc_ids, -scores))[:limit]
    return [
        ScoredDocument(int(doc_id), float(score)) for doc_id, score in zip(doc_ids[best], scores[best], strict=True)
    ]


__getattr__ = renamed_names(__name__, {'search_history': 'search_index'}, lambda new: globals()[new])
"""The names renamed in this release, for one more release: each access warns."""
