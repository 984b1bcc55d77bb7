"""Turning text into the terms the index stores and queries look up.

One rule for documents and queries alike, so a query term always meets the same spelling in the
index: maximal runs of Unicode word characters (letters, digits, underscore, in any script),
lower-cased. Nothing else is special: `OR`, `NOT`, `*`, quotes and `column:` are ordinary text, so
no query can be interpreted as search syntax.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

__all__ = ('MAX_TERM_LENGTH', 'normalize_term', 'term_frequencies', 'term_spans', 'tokenize')

_WORD = re.compile(r'\w+')

MAX_TERM_LENGTH = 64
"""Longer word runs (base64 blobs, hashes) are cut to this many characters before indexing.

Bounds the size of one posting key; a query term is cut the same way, so it still matches.
"""


def normalize_term(word: str) -> str:
    """The index spelling of one word run: lower-cased, then cut to `MAX_TERM_LENGTH`."""
    return word.lower()[:MAX_TERM_LENGTH]


def term_spans(text: str) -> Iterator[tuple[str, int, int]]:
    """Each term of `text` with the `(start, end)` character offsets of the word it came from.

    Lazy, so a caller looking for the first match (excerpts) or the first few distinct terms
    (queries) stops scanning as soon as it has what it needs.
    """
    for match in _WORD.finditer(text):
        yield normalize_term(match.group()), match.start(), match.end()


def tokenize(text: str) -> list[str]:
    """The terms of `text`, in order, repeats kept."""
    return [normalize_term(match.group()) for match in _WORD.finditer(text)]


def term_frequencies(text: str) -> tuple[Counter[str], int]:
    """How often each term occurs in `text`, and how many terms it has (the BM25 document length)."""
    terms = tokenize(text)
    return Counter(terms), len(terms)
