"""The conversation listing's cursor: where a page ended, as opaque text for `recall conversations
--after` and the HTTP API's `after`, checked once where it comes in.

A cursor is URL-safe base64 of a short JSON array: a format version, the position of the page's
last conversation (`store.ListingPosition`: its update time and id, both shown to the reader with
that page) and a tag of the listing it pages, derived from its scope, so a cursor pages only the
listing that handed it out. Nothing in it is secret and nothing in it is trusted: a cursor that was
altered, cut or made for another scope is refused before any store sees it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re

from ._validation import check_id
from .errors import InvalidIdentifier, InvalidSearchParameters, shown
from .store import ListingPosition

__all__ = ('MAX_CURSOR_LENGTH', 'cursor_position', 'cursor_text')

MAX_CURSOR_LENGTH = 4096
"""Longest cursor accepted, in characters: one naming a conversation id of the longest accepted length fits."""

_VERSION = 1
_ALPHABET = re.compile('[A-Za-z0-9_-]+')
"""What `cursor_text` writes: URL-safe base64 without padding."""
_ORDER_RANGE = range(-(2**63), 2**63)
"""What `updated_order` can hold on every backend (a signed 64-bit integer)."""


def _tag(listing: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(listing.encode()).digest()[:6]).decode()


def cursor_text(position: ListingPosition, listing: str) -> str:
    """The cursor of `position` in the listing named `listing` (one name per scope, see `query`)."""
    document = [_VERSION, position.updated_order, position.conversation_id, _tag(listing)]
    data = json.dumps(document, ensure_ascii=False, separators=(',', ':')).encode()
    return base64.urlsafe_b64encode(data).decode().rstrip('=')


def _refused(text: str, why: str) -> InvalidSearchParameters:
    return InvalidSearchParameters(
        f'The cursor {shown(text)} {why}; pass the next cursor a previous page of this listing printed, '
        'unchanged, or leave the cursor out to list from the newest conversation.'
    )


def cursor_position(text: str, listing: str) -> ListingPosition:
    """Where the page that handed out cursor `text` ended, if it is a cursor of the listing `listing`.

    Raises:
        InvalidSearchParameters: `text` is not a cursor this listing handed out (malformed, altered,
            cut, of another version, or made for another scope).
    """
    if len(text) > MAX_CURSOR_LENGTH:
        raise _refused(text, f'is longer than any cursor ({MAX_CURSOR_LENGTH} characters)')
    if not _ALPHABET.fullmatch(text):  # the decoder would skip other characters, reading an altered cursor
        raise _refused(text, 'is not a cursor')
    try:
        data = base64.urlsafe_b64decode(text + '=' * (-len(text) % 4))
        document = json.loads(data.decode())
    except (binascii.Error, ValueError, RecursionError):
        raise _refused(text, 'is not a cursor') from None
    if not (
        isinstance(document, list)
        and len(document) == 4  # pyright: ignore[reportUnknownArgumentType]
        and document[0] == _VERSION
        and type(document[1]) is int
        and document[1] in _ORDER_RANGE
        and isinstance(document[2], str)
        and isinstance(document[3], str)
    ):
        raise _refused(text, 'is not a cursor')
    order: int = document[1]
    conversation_id: str = document[2]
    tag: str = document[3]
    try:
        check_id(conversation_id, 'conversation id')
    except InvalidIdentifier:
        raise _refused(text, 'is not a cursor') from None
    if tag != _tag(listing):
        raise _refused(text, 'pages the conversations of another scope')
    return ListingPosition(updated_order=order, conversation_id=conversation_id)
