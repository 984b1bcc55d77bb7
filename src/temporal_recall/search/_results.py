"""What a search returns, and the bounds on what it may ask for.

The result models are pydantic so they serialize through Temporal's pydantic data converter as
activity results; they are frozen because a recorded activity result must not change on replay.
Fields that might be added to over time carry defaults, so a payload recorded by an older worker
still validates in a newer one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Literal, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from temporal_recall._search_terms import Role, SearchMode
from temporal_recall.errors import InvalidSearchParameters
from temporal_recall.search._bm25 import BM25Parameters

__all__ = (
    'CONTEXT_EXCERPT_WIDTH',
    'EXCERPT_WIDTH',
    'MAX_CONTEXT_LINES',
    'MAX_LIMIT',
    'MAX_QUERY_ECHO_CHARS',
    'ROLES',
    'SEARCH_MODES',
    'Arm',
    'ContextMessage',
    'ModeFilter',
    'Role',
    'RoleFilter',
    'SearchHit',
    'SearchMode',
    'SearchOptions',
    'SearchResult',
)

MAX_LIMIT = 100
"""Most hits one search returns; keeps a result well inside one Temporal payload and a model's context."""
MAX_CONTEXT_LINES = 3
"""Most neighbouring messages shown on each side of a hit."""
EXCERPT_WIDTH = 240
"""Characters of a hit's own message shown."""
CONTEXT_EXCERPT_WIDTH = 160
"""Characters of each neighbouring message shown."""
MAX_QUERY_ECHO_CHARS = 200
"""Characters of the query text repeated back in a result."""


ROLES: tuple[Role, ...] = get_args(Role)


def check_role(value: object) -> Role:
    """`value` if it names a role; otherwise `InvalidSearchParameters` listing the roles there are."""
    for role in ROLES:
        if value == role:
            return role
    shown = repr(value)[:40]
    raise InvalidSearchParameters(
        f'role={shown} is not a role: use one of {", ".join(ROLES)}, or no role to search every message.'
    )


RoleFilter = Annotated[Role, BeforeValidator(check_role)]
"""A role field of a request, refused with `InvalidSearchParameters` (not a `ValidationError`) when unknown."""


SEARCH_MODES: tuple[SearchMode, ...] = get_args(SearchMode)

Arm = Literal['bm25', 'semantic']
"""Which ranking found a hit: the words, or the meaning."""


def check_mode(value: object) -> SearchMode:
    """`value` if it names a search mode; otherwise `InvalidSearchParameters` listing the modes there are."""
    for mode in SEARCH_MODES:
        if value == mode:
            return mode
    raise InvalidSearchParameters(
        f'mode={repr(value)[:40]} is not a search mode: use one of {", ".join(SEARCH_MODES)}, or none for the '
        'default (hybrid with an embedder, else bm25).'
    )


ModeFilter = Annotated[SearchMode, BeforeValidator(check_mode)]
"""A mode field of a request, refused with `InvalidSearchParameters` (not a `ValidationError`) when unknown."""


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


class ContextMessage(BaseModel):
    """A message next to a hit, shown so the hit can be read in context."""

    model_config = ConfigDict(frozen=True)

    position: int
    role: str
    excerpt: str = ''


class SearchHit(BaseModel):
    """One matching message and where to find it again."""

    model_config = ConfigDict(frozen=True)

    score: float
    conversation_id: str
    run_id: str | None = None
    entry_id: str
    position: int
    role: str
    timestamp: datetime | None = None
    excerpt: str = ''
    context: list[ContextMessage] = Field(default_factory=list[ContextMessage])
    """Neighbouring messages in position order, not repeating ones shown as a hit or as an earlier
    hit's context."""
    found_by: list[Arm] = Field(default_factory=lambda: ['bm25'])
    """Which rankings found it: its words (`bm25`), its meaning (`semantic`), or both in a hybrid search."""


class SearchResult(BaseModel):
    """Everything one search found, best hit first."""

    model_config = ConfigDict(frozen=True)

    query: str
    """The query text as asked, cut to `MAX_QUERY_ECHO_CHARS`."""
    hits: list[SearchHit] = Field(default_factory=list[SearchHit])
    searched_documents: int = 0
    """How many indexed messages the search could see."""
    truncated_query: bool = False
    """Whether only the query's first `MAX_QUERY_TERMS` distinct terms were searched."""
    message: str | None = None
    """Why nothing could be searched (for example, no conversation to search), for the reader."""
    mode: SearchMode = 'bm25'
    """How the hits were ranked (`SearchRequest.mode`, resolved)."""

    @field_validator('query')
    @classmethod
    def _clip_query(cls, value: str) -> str:
        if len(value) <= MAX_QUERY_ECHO_CHARS:
            return value
        return value[: MAX_QUERY_ECHO_CHARS - 1] + '…'
