"""One search over the persisted history, shared by the activity, the model tool, the CLI and the API.

The backend only fetches rows through `IndexReader`; ranking, excerpts and result shaping are pure
code in `temporal_recall.search`, so SQLite and PostgreSQL give the same answers by construction.
"""

from __future__ import annotations

from .errors import InvalidSearchParameters, UnknownConversation
from .models import SearchRequest
from .search import BM25Parameters, SearchOptions, SearchResult, build_hits, parse_query, rank
from .store._protocol import IndexReader, SearchTarget

__all__ = ('search_history', 'target_of')


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
    postings = await reader.postings(target, query.terms)
    candidates = sum(len(found) for found in postings.values())
    fetch = options.limit
    while True:
        ranked = rank(stats, postings, query.terms, parameters=options.parameters, limit=fetch)
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
