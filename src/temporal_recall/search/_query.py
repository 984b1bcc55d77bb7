"""Turning what a model or person typed into the terms to look up.

A query is a bag of words, nothing more: it goes through the same analyzer as documents (in its
query form, which looks up a CJK part by its character pairs: see `_analyzer`), so search
operators, quotes, column prefixes and control characters are plain text and can never change what
is searched or how. Both bounds are enforced before any real work is done, so a hostile or runaway
query costs at most one length check plus a scan of `MAX_QUERY_CHARS` characters.
"""

from __future__ import annotations

from dataclasses import dataclass

from temporal_recall.errors import InvalidQuery
from temporal_recall.text._analyzer import query_terms

__all__ = ('MAX_QUERY_CHARS', 'MAX_QUERY_TERMS', 'Query', 'parse_query')

MAX_QUERY_CHARS = 65_536
"""Longer query text is refused outright rather than clipped: a query that long is a bug or an
attack, and silently searching a prefix of it would hide that."""

MAX_QUERY_TERMS = 32
"""Further distinct terms are dropped (and `Query.truncated` says so). Each term costs one postings
lookup, and past a few dozen words the extra terms barely change the ranking."""

_VALID_QUERY_HINT = 'Pass a few words to look for, for example "deployment region" or "invoice 4521".'


@dataclass(frozen=True, kw_only=True)
class Query:
    terms: tuple[str, ...]
    """Distinct terms in order of first occurrence, at most `MAX_QUERY_TERMS`."""
    truncated: bool = False
    """Whether the text had more distinct terms than were kept."""


def _is_text(value: object) -> bool:
    # Model-facing callers are not type-checked, so the annotation alone is no guarantee.
    return isinstance(value, str)


def parse_query(text: str) -> Query:
    """The terms to search for in `text`; raises `InvalidQuery` if there is nothing usable."""
    if not _is_text(text):
        raise InvalidQuery(f'The query must be text, got {type(text).__name__}. {_VALID_QUERY_HINT}')
    if len(text) > MAX_QUERY_CHARS:
        raise InvalidQuery(
            f'The query is {len(text):,} characters long; the limit is {MAX_QUERY_CHARS:,}. '
            'Search for a few distinctive words instead of pasting a whole text.'
        )
    if not text.strip():
        raise InvalidQuery(f'The query is empty or only whitespace. {_VALID_QUERY_HINT}')

    terms: dict[str, None] = {}
    truncated = False
    for term in query_terms(text):
        if term in terms:
            continue
        if len(terms) == MAX_QUERY_TERMS:
            truncated = True
            break
        terms[term] = None
    if not terms:
        raise InvalidQuery(
            'The query has no words in it, only punctuation or symbols, so there is nothing to look up. '
            f'{_VALID_QUERY_HINT}'
        )
    return Query(terms=tuple(terms), truncated=truncated)
