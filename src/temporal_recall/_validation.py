"""The one rule for ids, queries and search filters that come from outside: checked once, where they enter.

Every interface funnels its input through these checks (the models that cross Temporal boundaries,
the HTTP API, the CLI, the stores' primitives), so a control character, a lone surrogate or an
over-long id is refused the same way everywhere, before a driver sees it (PostgreSQL cannot store NUL,
and neither driver encodes a lone surrogate). They raise our errors, not `ValueError`, because pydantic
lets any other exception through: a bad model field raises a `RecallError`, not a `ValidationError`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, TypeVar

from pydantic import AfterValidator, BeforeValidator, ValidationInfo

from ._search_terms import ROLES, SEARCH_MODES, Role, SearchMode
from .errors import InvalidIdentifier, InvalidQuery, InvalidSearchParameters, shown

__all__ = (
    'MAX_ID_LENGTH',
    'Identifier',
    'ModeFilter',
    'QueryText',
    'RoleFilter',
    'check_id',
    'check_mode',
    'check_optional_id',
    'check_query',
    'check_role',
)

MAX_ID_LENGTH = 512
"""Longest conversation id, run id, scope or entry id accepted, in characters (documented in the README)."""

_NOT_IN_IDS = re.compile('[\x00-\x1f\x7f-\x9f\ud800-\udfff]')
"""Control characters (Unicode category Cc) and surrogates (Cs): never part of an id."""

_NOT_IN_QUERIES = re.compile('[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]')
"""The same, except tab, line feed and carriage return, which a pasted query may hold as spacing."""


def _problem(value: str, pattern: re.Pattern[str]) -> str | None:
    found = pattern.search(value)
    if found is None:
        return None
    where = f'U+{ord(found.group()):04X} at position {found.start()}'
    if '\ud800' <= found.group() <= '\udfff':
        return f'is not valid text: it holds the lone surrogate {where} (from undecodable bytes or invalid UTF-8)'
    return f'holds the control character {where}'


def check_id(value: object, what: str = 'id') -> str:
    """`value` if it is usable as an id; otherwise raise `InvalidIdentifier` naming `what` and the problem.

    An id is a string of at most `MAX_ID_LENGTH` characters with no control characters or surrogates.
    """
    if not isinstance(value, str):
        raise InvalidIdentifier(f'The {what} must be a string, not {type(value).__name__}.')
    if len(value) > MAX_ID_LENGTH:
        raise InvalidIdentifier(
            f'The {what} {shown(value)} is longer than {MAX_ID_LENGTH} characters; use a shorter id.'
        )
    problem = _problem(value, _NOT_IN_IDS)
    if problem is not None:
        raise InvalidIdentifier(f'The {what} {shown(value)} {problem}; an id must be printable text.')
    return value


def check_optional_id(value: object, what: str = 'id') -> str | None:
    """`check_id`, letting `None` through."""
    return None if value is None else check_id(value, what)


def check_query(value: str) -> str:
    """`value` if it holds no control character (tab and newlines aside) or surrogate; else `InvalidQuery`.

    Emptiness and size are the search's own rules (`parse_query`); this is only about valid text.
    """
    problem = _problem(value, _NOT_IN_QUERIES)
    if problem is not None:
        raise InvalidQuery(f'The query {shown(value)} {problem}; search for printable text.')
    return value


def _field_id(value: str, info: ValidationInfo) -> str:
    return check_id(value, f'`{info.field_name}`' if info.field_name else 'id')


def _field_query(value: str) -> str:
    return check_query(value)


Identifier = Annotated[str, AfterValidator(_field_id)]
"""A `str` field checked with `check_id`; errors name the field."""

QueryText = Annotated[str, AfterValidator(_field_query)]
"""A `str` field checked with `check_query`."""


_Choice = TypeVar('_Choice', bound=str)


def _one_of(value: object, choices: Sequence[_Choice], field: str, what: str, otherwise: str) -> _Choice:
    """`value` if it is one of `choices`; otherwise `InvalidSearchParameters` listing them."""
    for choice in choices:
        if value == choice:
            return choice
    raise InvalidSearchParameters(
        f'{field}={repr(value)[:40]} is not {what}: use one of {", ".join(choices)}, or {otherwise}.'
    )


def check_role(value: object) -> Role:
    """`value` if it names a role; otherwise `InvalidSearchParameters` listing the roles there are."""
    return _one_of(value, ROLES, 'role', 'a role', 'no role to search every message')


RoleFilter = Annotated[Role, BeforeValidator(check_role)]
"""A role field of a request, refused with `InvalidSearchParameters` (not a `ValidationError`) when unknown."""


def check_mode(value: object) -> SearchMode:
    """`value` if it names a search mode; otherwise `InvalidSearchParameters` listing the modes there are."""
    return _one_of(
        value, SEARCH_MODES, 'mode', 'a search mode', 'none for the default (hybrid with an embedder, else bm25)'
    )


ModeFilter = Annotated[SearchMode, BeforeValidator(check_mode)]
"""A mode field of a request, refused with `InvalidSearchParameters` (not a `ValidationError`) when unknown."""
