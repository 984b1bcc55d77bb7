"""How much a search may ask for and show: its options and their bounds, checked before any store is touched."""

from __future__ import annotations

from dataclasses import dataclass, field

from temporal_recall.errors import InvalidSearchParameters
from temporal_recall.search._bm25 import BM25Parameters

__all__ = ('CONTEXT_EXCERPT_WIDTH', 'EXCERPT_WIDTH', 'MAX_CONTEXT_LINES', 'MAX_LIMIT', 'SearchOptions')

MAX_LIMIT = 100
"""Most hits one search returns; keeps a result well inside one Temporal payload and a model's context."""
MAX_CONTEXT_LINES = 3
"""Most neighbouring messages shown on each side of a hit."""
EXCERPT_WIDTH = 240
"""Characters of a hit's own message shown."""
CONTEXT_EXCERPT_WIDTH = 160
"""Characters of each neighbouring message shown."""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, kw_only=True)
class SearchOptions:
    """How many hits, how much context and which BM25 weights; validated on construction so a bad
    request is refused before any store is touched."""

    limit: int = 10
    context_lines: int = 0
    parameters: BM25Parameters = field(default_factory=BM25Parameters)

    def __post_init__(self) -> None:
        if not _is_int(self.limit) or not 1 <= self.limit <= MAX_LIMIT:
            raise InvalidSearchParameters(
                f'limit={self.limit!r} is out of range: ask for between 1 and {MAX_LIMIT} results.'
            )
        if not _is_int(self.context_lines) or not 0 <= self.context_lines <= MAX_CONTEXT_LINES:
            raise InvalidSearchParameters(
                f'context_lines={self.context_lines!r} is out of range: use 0 (no context) up to '
                f'{MAX_CONTEXT_LINES} messages on each side of a hit.'
            )
