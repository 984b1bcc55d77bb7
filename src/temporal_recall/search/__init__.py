"""Search over the persisted history: the pure ranking, and the plan that runs it over a store.

The names exported here (parsing a query, BM25 ranking, fusion, excerpts, hits and their rendering) are
pure, with no database, clock or randomness: workflows import them in the sandbox, and SQLite and
PostgreSQL rank alike because a backend only fetches postings and rows (`store.protocol.IndexReader`).
`search.plan` runs a search against a store in activities (`temporal_recall.search_index`).
"""

from __future__ import annotations

from temporal_recall._search_terms import ROLES, SEARCH_MODES, Arm, Role, SearchMode
from temporal_recall._validation import ModeFilter, RoleFilter
from temporal_recall.models import MAX_QUERY_ECHO_CHARS, ContextMessage, SearchHit, SearchResult
from temporal_recall.search._assemble import build_hits, render_for_model
from temporal_recall.search._bm25 import DEFAULT_PARAMETERS, BM25Parameters, ScoredDocument, idf, rank
from temporal_recall.search._excerpt import excerpt
from temporal_recall.search._options import (
    CONTEXT_EXCERPT_WIDTH,
    EXCERPT_WIDTH,
    MAX_CONTEXT_LINES,
    MAX_LIMIT,
    SearchOptions,
)
from temporal_recall.search._query import MAX_QUERY_CHARS, MAX_QUERY_TERMS, Query, parse_query
from temporal_recall.text._analyzer import (
    ANALYZER,
    MAX_TERM_LENGTH,
    Analyzer,
    normalize_term,
    query_terms,
    term_frequencies,
    term_spans,
    tokenize,
)
from temporal_recall.text._documents import (
    MAX_ATTACHMENT_BYTES,
    SummaryRule,
    document_texts,
    is_summary,
    is_summary_part,
    message_role,
    searchable_text,
    transcript_text,
)

__all__ = (
    'ANALYZER',
    'CONTEXT_EXCERPT_WIDTH',
    'DEFAULT_PARAMETERS',
    'EXCERPT_WIDTH',
    'MAX_ATTACHMENT_BYTES',
    'MAX_CONTEXT_LINES',
    'MAX_LIMIT',
    'MAX_QUERY_CHARS',
    'MAX_QUERY_ECHO_CHARS',
    'MAX_QUERY_TERMS',
    'MAX_TERM_LENGTH',
    'ROLES',
    'SEARCH_MODES',
    'Analyzer',
    'Arm',
    'BM25Parameters',
    'ContextMessage',
    'ModeFilter',
    'Query',
    'Role',
    'RoleFilter',
    'ScoredDocument',
    'SearchHit',
    'SearchMode',
    'SearchOptions',
    'SearchResult',
    'SummaryRule',
    'build_hits',
    'document_texts',
    'excerpt',
    'idf',
    'is_summary',
    'is_summary_part',
    'message_role',
    'normalize_term',
    'parse_query',
    'query_terms',
    'rank',
    'render_for_model',
    'searchable_text',
    'term_frequencies',
    'term_spans',
    'tokenize',
    'transcript_text',
)
