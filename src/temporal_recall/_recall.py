"""One search over the persisted history, shared by the activity, the model tool, the CLI and the API.

The backend only fetches rows through `IndexReader`; ranking, excerpts and result shaping are pure
code in `temporal_recall.search`, so SQLite and PostgreSQL give the same answers by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from .errors import InvalidSearchParameters, UnknownConversation
from .models import SearchRequest
from .search import BM25Parameters, ScoredDocument, SearchOptions, SearchResult, build_hits, parse_query, rank
from .search._bm25 import term_idf, term_weight
from .store._protocol import IndexReader, IndexStats, Posting, SearchTarget

__all__ = ('LONG_POSTING_LIST', 'ImpactReader', 'search_history', 'target_of')

LONG_POSTING_LIST = 1_000
"""A term in more documents than this is read in impact order in a scope-wide search."""


@runtime_checkable
class ImpactReader(IndexReader, Protocol):
    """Optional reads that let a scope-wide search skip most of a common term's posting list.

    Each returns `None` for a target it does not serve (a conversation or a run); the search then
    reads whole posting lists.
    """

    async def document_frequencies(self, target: SearchTarget, terms: Sequence[str]) -> dict[str, int] | None: ...

    async def top_postings(
        self, target: SearchTarget, term: str, per_group: int
    ) -> tuple[list[Posting], list[tuple[int, int]]] | None: ...

    async def postings_for(self, target: SearchTarget, term: str, doc_ids: Sequence[int]) -> list[Posting]: ...


def target_of(request: SearchRequest) -> SearchTarget:
    """The trusted target of a request, refusing an ambiguous one instead of widening it."""
    if request.all_conversations:
        if request.conversation_id is not None:
            raise InvalidSearchParameters(
                'Pass either `conversation_id` or `all_conversations=True`, not both: '
                'an explicit conversation narrows the search, `all_conversations` widens it.'
            )
        return SearchTarget(scope=request.scope, conversation_id=None, run_id=request.run_id)
    if not request.conversation_id:
        raise InvalidSearchParameters(
            "No conversation id to search: pass the calling conversation's id, or `all_conversations=True` "
            'for a store isolated to one principal. Nothing was searched.'
        )
    return SearchTarget(scope=request.scope, conversation_id=request.conversation_id, run_id=request.run_id)


async def search_history(reader: IndexReader, request: SearchRequest) -> SearchResult:
    """Run `request` against the index.

    Raises:
        InvalidQuery: the query is empty or too large.
        InvalidSearchParameters: limit, context or BM25 parameters out of range, or no target.
        UnknownConversation: the conversation does not exist in the request's scope (the same
            answer whether it does not exist at all or belongs to another scope).
    """
    query = parse_query(request.query)
    options = SearchOptions(
        limit=request.limit,
        context_lines=request.context_lines,
        parameters=BM25Parameters(k1=request.k1, b=request.b),
    )
    target = target_of(request)
    stats = await reader.index_stats(target)
    if stats is None:
        raise UnknownConversation(target.conversation_id or '')
    fetch = options.limit
    while True:
        ranked, candidates = await _ranked(reader, target, stats, query.terms, options.parameters, fetch)
        rows = await reader.documents(target, [scored.doc_id for scored in ranked], context=options.context_lines)
        order = {scored.doc_id: index for index, scored in enumerate(ranked)}
        rows = sorted(
            (row for row in rows if request.exclude_run_id is None or row.run_id != request.exclude_run_id),
            key=lambda row: order[row.doc_id],
        )
        # Excluded rows leave gaps: widen the ranking until the page is full or nothing is left.
        if len(rows) >= options.limit or len(ranked) < fetch or fetch >= candidates:
            break
        fetch *= 4
    kept = {row.doc_id for row in rows[: options.limit]}
    ranked = [scored for scored in ranked if scored.doc_id in kept]
    hits = build_hits(ranked, rows[: options.limit], query.terms, context_lines=options.context_lines)
    return SearchResult(
        query=request.query[:200],
        hits=hits,
        searched_documents=stats.document_count,
        truncated_query=query.truncated,
    )


async def _ranked(
    reader: IndexReader,
    target: SearchTarget,
    stats: IndexStats,
    terms: Sequence[str],
    parameters: BM25Parameters,
    limit: int,
) -> tuple[list[ScoredDocument], int]:
    """The exact top `limit` documents, and how many documents matched at all (an upper bound)."""
    if isinstance(reader, ImpactReader):
        frequencies = await reader.document_frequencies(target, terms)
        if frequencies is not None and any(count > LONG_POSTING_LIST for count in frequencies.values()):
            ranked = await _ranked_by_impact(reader, target, stats, terms, parameters, limit, frequencies)
            return ranked, sum(frequencies.values())
    postings = await reader.postings(target, terms)
    ranked = rank(stats, postings, terms, parameters=parameters, limit=limit)
    return ranked, sum(len(found) for found in postings.values())


async def _ranked_by_impact(
    reader: ImpactReader,
    target: SearchTarget,
    stats: IndexStats,
    terms: Sequence[str],
    parameters: BM25Parameters,
    limit: int,
    frequencies: dict[str, int],
) -> list[ScoredDocument]:
    """Exact BM25 top-k that reads only the best-scoring part of each long posting list.

    Within one term, a document's weight grows with its term frequency and shrinks with its length,
    so the best documents of a term are the shortest ones of each frequency group. Short lists are
    read whole; long ones only to `per_group` documents per frequency, and every candidate found
    anywhere gets its exact frequency for every term. A document found nowhere cannot score more
    than the sum of each long term's best unread weight; when the k-th result beats that bound
    strictly (a tie might lose on doc_id), the answer equals a full ranking, and otherwise the
    read widens and repeats.
    """
    present = [term for term in dict.fromkeys(terms) if term in frequencies]
    short = [term for term in present if frequencies[term] <= LONG_POSTING_LIST]
    long = [term for term in present if frequencies[term] > LONG_POSTING_LIST]
    short_postings = await reader.postings(target, short) if short else {}
    average_length = stats.total_length / stats.document_count if stats.document_count else 0.0
    per_group = max(2 * limit, 32)
    while True:
        heads: dict[str, list[Posting]] = {}
        bound = 0.0
        exhausted = True
        for term in long:
            read = await reader.top_postings(target, term, per_group)
            assert read is not None  # the same target answered document_frequencies
            heads[term], frontier = read
            exhausted = exhausted and not frontier
            weight_of_term = term_idf(stats.document_count, frequencies[term])
            bound += max(
                (term_weight(weight_of_term, tf, dl, average_length, parameters) for tf, dl in frontier), default=0.0
            )
        candidates = {posting.doc_id for found in (*short_postings.values(), *heads.values()) for posting in found}
        postings: dict[str, list[Posting]] = {term: list(found) for term, found in short_postings.items()}
        for term in long:
            known = {posting.doc_id for posting in heads[term]}
            missing = [doc_id for doc_id in candidates if doc_id not in known]
            postings[term] = [*heads[term], *(await reader.postings_for(target, term, missing) if missing else [])]
        ranked = rank(stats, postings, terms, parameters=parameters, limit=limit, document_frequencies=frequencies)
        if exhausted or (len(ranked) == limit and ranked[-1].score > bound):
            return ranked
        per_group *= 4
