"""The search plan: one search over the persisted history, shared by the activity, the model tool, the CLI and the API.

It decides which postings to read, through the store's reader protocol (`IndexReader`, and
`ImpactReader` where a backend can read a long posting list best-first), and hands them to the pure
ranking of this package: a conversation-driven search reads every posting of its terms, a
scope-wide search over a common term reads it in impact order and stops once the page is exact.
The backend only fetches rows, so SQLite and PostgreSQL give the same answers by construction.

This module awaits the store and records metrics, so `temporal_recall.search` does not import it:
the package stays pure and safe in the workflow sandbox, and activity-side code imports the plan
from here.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import replace

from temporal_recall._metrics import record_search
from temporal_recall.errors import InvalidSearchParameters, UnknownConversation
from temporal_recall.models import SearchRequest
from temporal_recall.search._assemble import build_hits
from temporal_recall.search._bm25 import (
    BM25Parameters,
    ScoredDocument,
    rank,
    summed,
    term_idf,
    term_weight,
    term_weights,
)
from temporal_recall.search._query import parse_query
from temporal_recall.search._results import SearchOptions, SearchResult
from temporal_recall.store._protocol import ImpactReader, IndexReader, IndexStats, Posting, SearchTarget

__all__ = ('LONG_POSTING_LIST', 'ImpactReader', 'search_history', 'target_of')

LONG_POSTING_LIST = 1_000
"""A term in more documents than this is read in impact order in a scope-wide search."""

FIRST_READ_PER_GROUP = 32
"""Postings first read per frequency group of a long term (at least twice the page size)."""


def target_of(request: SearchRequest) -> SearchTarget:
    """The trusted target of a request, refusing an ambiguous one instead of widening it."""
    if request.all_conversations:
        if request.conversation_id is not None:
            raise InvalidSearchParameters(
                'Pass either `conversation_id` or `all_conversations=True`, not both: '
                'an explicit conversation narrows the search, `all_conversations` widens it.'
            )
        return SearchTarget(scope=request.scope, conversation_id=None, run_id=request.run_id, role=request.role)
    if not request.conversation_id:
        raise InvalidSearchParameters(
            "No conversation id to search: pass the calling conversation's id, or `all_conversations=True` "
            'for a store isolated to one principal. Nothing was searched.'
        )
    return SearchTarget(
        scope=request.scope, conversation_id=request.conversation_id, run_id=request.run_id, role=request.role
    )


async def search_history(reader: IndexReader, request: SearchRequest) -> SearchResult:
    """Run `request` against the index; inside an activity, its latency and hits go to the worker's metrics.

    Raises:
        InvalidQuery: the query is empty or too large.
        InvalidSearchParameters: limit, context or BM25 parameters out of range, or no target.
        UnknownConversation: the conversation does not exist in the request's scope (the same
            answer whether it does not exist at all or belongs to another scope).
    """
    started = time.perf_counter()
    result = await _search(reader, request)
    record_search(time.perf_counter() - started, len(result.hits))
    return result


async def _search(reader: IndexReader, request: SearchRequest) -> SearchResult:
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
        # One row per occurrence, documents in ranked order: `limit` counts occurrences.
        rows = await reader.documents(
            target,
            [scored.doc_id for scored in ranked],
            context=options.context_lines,
            limit=options.limit,
            exclude_run_id=request.exclude_run_id,
        )
        # Excluded occurrences leave gaps: widen the ranking until the page is full or nothing is left.
        if len(rows) >= options.limit or len(ranked) < fetch or fetch >= candidates:
            break
        fetch *= 4
    kept = {row.doc_id for row in rows}
    ranked = [scored for scored in ranked if scored.doc_id in kept]
    hits = build_hits(ranked, rows, query.terms, context_lines=options.context_lines)
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
    if target.role is not None:
        postings = await reader.postings(target, terms)
        frequencies = await _unfiltered_frequencies(reader, replace(target, role=None), terms)
        ranked = rank(stats, postings, terms, parameters=parameters, limit=limit, document_frequencies=frequencies)
        return ranked, sum(len(found) for found in postings.values())
    if isinstance(reader, ImpactReader):
        frequencies = await reader.document_frequencies(target, terms)
        if frequencies is not None and any(count > LONG_POSTING_LIST for count in frequencies.values()):
            ranked = await _ranked_by_impact(reader, target, stats, terms, parameters, limit, frequencies)
            return ranked, sum(frequencies.values())
    postings = await reader.postings(target, terms)
    ranked = rank(stats, postings, terms, parameters=parameters, limit=limit)
    return ranked, sum(len(found) for found in postings.values())


async def _unfiltered_frequencies(reader: IndexReader, target: SearchTarget, terms: Sequence[str]) -> dict[str, int]:
    """Each term's document frequency over the whole target: a role filter narrows the hits, and
    ranking it with the idf of the whole conversation (or scope) keeps every hit's score what it is
    without the filter."""
    if isinstance(reader, ImpactReader):
        frequencies = await reader.document_frequencies(target, terms)
        if frequencies is not None:
            return frequencies
    return {term: len(found) for term, found in (await reader.postings(target, terms)).items()}


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
    read whole; long ones only to a per-term depth per frequency (their heads). A candidate (a
    document in some head or short list) is looked up in the other long terms only if it could
    still make the page (see `_worth_probing`). A document found nowhere cannot score more than the
    sum of each long term's best unread weight; when the k-th result beats that bound strictly (a
    tie might lose on doc_id), the page equals a full ranking, which `rank` then computes over the
    postings read. Otherwise only the term whose unread part could add the most is read deeper: a
    very common term has a small weight, so reading deep into its long list would cost the most and
    tighten the bound the least.
    """
    order = [term for term in dict.fromkeys(terms) if term in frequencies]
    short = [term for term in order if frequencies[term] <= LONG_POSTING_LIST]
    long = [term for term in order if frequencies[term] > LONG_POSTING_LIST]
    short_postings = await reader.postings(target, short) if short else {}
    average_length = stats.total_length / stats.document_count if stats.document_count else 0.0
    idf_of = {term: term_idf(stats.document_count, frequencies[term]) for term in order}

    def weights(term: str, postings: Iterable[Posting]) -> dict[int, float]:
        return term_weights(idf_of[term], postings, average_length, parameters)

    depth = dict.fromkeys(long, max(2 * limit, FIRST_READ_PER_GROUP))
    heads: dict[str, list[Posting]] = {}
    unread_best: dict[str, float] = {}
    probed: dict[str, dict[int, Posting | None]] = {term: {} for term in long}
    """Per long term: candidates looked up outside its heads, with their posting or `None` if absent."""
    known: dict[str, dict[int, float]] = {term: weights(term, found) for term, found in short_postings.items()}
    """Per term, the exact weight of every document read for it so far."""
    stale = set(long)
    while True:
        for term in stale:
            read = await reader.top_postings(target, term, depth[term])
            assert read is not None  # the same target answered document_frequencies
            heads[term], frontier = read
            unread_best[term] = max(
                (term_weight(idf_of[term], tf, dl, average_length, parameters) for tf, dl in frontier), default=0.0
            )
            found = [posting for posting in probed[term].values() if posting is not None]
            known[term] = weights(term, [*heads[term], *found])
        stale.clear()
        resolved = {term: known[term].keys() | probed[term].keys() for term in long}
        lower = _scores(order, known)
        wanted = _worth_probing(lower, resolved, unread_best, limit)
        for term, missing in wanted.items():
            found = {posting.doc_id: posting for posting in await reader.postings_for(target, term, missing)}
            probed[term].update((doc_id, found.get(doc_id)) for doc_id in missing)
            known[term].update(weights(term, found.values()))
        scores = _scores(order, known) if wanted else lower
        page = heapq.nsmallest(limit, scores.items(), key=lambda item: (-item[1], item[0]))
        widen = [term for term in long if unread_best[term] > 0.0]
        if not widen or (len(page) == limit and page[-1][1] > sum(unread_best.values())):
            break
        deepest = max(widen, key=lambda term: unread_best[term])
        depth[deepest] *= 8
        stale.add(deepest)
    postings: dict[str, list[Posting]] = {term: list(found) for term, found in short_postings.items()}
    for term in long:
        in_heads = {posting.doc_id for posting in heads[term]}
        extra = [posting for doc_id, posting in probed[term].items() if posting is not None and doc_id not in in_heads]
        postings[term] = [*heads[term], *extra]
    return rank(stats, postings, terms, parameters=parameters, limit=limit, document_frequencies=frequencies)


def _scores(order: Sequence[str], known: dict[str, dict[int, float]]) -> dict[int, float]:
    """Each document's known weights, added in query-term order exactly as `rank` adds them."""
    return summed(known[term] for term in order if term in known)


def _worth_probing(
    lower: dict[int, float],
    resolved: Mapping[str, Set[int]],
    unread_best: dict[str, float],
    limit: int,
) -> dict[str, list[int]]:
    """Per long term, the candidates whose frequency for it must be looked up to rank them exactly.

    A candidate's known weights add up to a lower bound of its score (`lower`); each long term it has not
    been resolved for (it is in none of the term's heads and was not looked up) can add at most
    that term's best unread weight. The `limit`-th best lower bound is a score the page reaches for
    sure, so a candidate whose upper bound stays below it cannot make the page and is not looked
    up: its partial score stays below every exactly scored document of the page.
    """
    if len(lower) >= limit:
        threshold = heapq.nlargest(limit, lower.values())[-1]
        # Sums in another order than `rank` uses may differ in the last bits: err towards looking up.
        threshold -= 1e-9 * max(1.0, abs(threshold))
    else:
        threshold = float('-inf')
    unknown = {term: lower.keys() - done for term, done in resolved.items()}
    upper = dict(lower)
    for term, documents in unknown.items():
        for doc_id in documents:
            upper[doc_id] += unread_best[term]
    wanted: dict[str, list[int]] = {}
    for term, documents in unknown.items():
        chosen = [doc_id for doc_id in documents if upper[doc_id] >= threshold]
        if chosen:
            wanted[term] = chosen
    return wanted
