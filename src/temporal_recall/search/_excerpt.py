"""The piece of a long message a reader needs to see why it matched.

Matching uses the analyzer's own terms and their places in the text, so the excerpt is centred on
what the index actually matched, in any script: `cat` finds `Cat.`, not `concatenate`; `cafe` finds
`café`; `天気` finds the two characters inside `東京の天気は`; and a match deep inside a long tool
output is shown rather than the unrelated beginning. One forward scan that stops at the first match keeps the cost
linear in the text, however long.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from temporal_recall.text._analyzer import MAX_TERM_LENGTH, normalize_term, term_spans

__all__ = ('ELLIPSIS', 'MIN_EXCERPT_WIDTH', 'excerpt')

ELLIPSIS = '…'
MIN_EXCERPT_WIDTH = 8
"""Narrower windows would be mostly ellipsis."""


def _first_match(text: str, terms: Collection[str]) -> tuple[int, int] | None:
    wanted = {normalize_term(term) for term in terms}
    if not wanted:
        return None
    if text.isascii():
        return _first_ascii_match(text, wanted)
    for term, start, end in term_spans(text):
        if term in wanted:
            return start, end
    return None


def _first_ascii_match(text: str, wanted: Collection[str]) -> tuple[int, int] | None:
    """`_first_match` in ASCII text, by `str.find` over it lower-cased, at C speed.

    Why: a hit's message is scanned to its first match, and scanned term by term in Python that was
    a tenth of a rare id's search (0.13 ms of about 2.2, a page of one long message). The analyzer
    makes an ASCII word run's term the run lower-cased and cut to `MAX_TERM_LENGTH`, so the first run
    equal to a wanted term (or, for a term of that length, starting with it) is the first match;
    lower-casing ASCII keeps every offset. A term that is not all word characters is no ASCII run's.
    (A regular expression of the terms would cost more to compile than the scan: each rare id is new.)"""
    lowered = text.lower()
    best: tuple[int, int] | None = None
    for term in wanted:
        if not (term.isascii() and _WORD.fullmatch(term)):
            continue
        at = lowered.find(term)
        while at != -1 and (best is None or at < best[0]):
            end = at + len(term)
            if at == 0 or not _is_word(lowered[at - 1]):
                if len(term) == MAX_TERM_LENGTH:  # A longer run is cut to this term: the whole run matches.
                    while end < len(lowered) and _is_word(lowered[end]):
                        end += 1
                if end == len(lowered) or not _is_word(lowered[end]):
                    best = (at, end)
                    break
            at = lowered.find(term, at + 1)
    return best


_WORD = re.compile(r'\w+')


def _is_word(char: str) -> bool:
    """Whether an ASCII character belongs to a word run (`\\w`)."""
    return char.isalnum() or char == '_'


def excerpt(text: str, terms: Collection[str], *, width: int = 240) -> str:
    """At most `width` characters of `text`, whitespace collapsed, around the first matching term.

    The match is placed about a third of the way into the window so some lead-in stays visible;
    `…` marks each end where text was cut. With no match, the beginning of the text is shown.
    """
    if width < MIN_EXCERPT_WIDTH:
        raise ValueError(f'An excerpt width of {width} is too narrow; use at least {MIN_EXCERPT_WIDTH}.')
    flat = ' '.join(text.split())
    if len(flat) <= width:
        return flat

    match = _first_match(flat, terms)
    if match is None:
        start = 0
    else:
        match_start, match_end = match
        # At least one character of lead, so the leading ellipsis never eats the match's first letter.
        lead = max(1, (width - (match_end - match_start)) // 3)
        start = min(max(0, match_start - lead), len(flat) - width)
    end = start + width

    # Make room for the ellipses inside the window, taking it from the side being cut.
    prefix = suffix = ''
    if start > 0:
        prefix = ELLIPSIS
        start += 1
    if end < len(flat):
        suffix = ELLIPSIS
        end -= 1
    body = flat[start:end]
    if prefix:
        body = body.lstrip(' ')
    if suffix:
        body = body.rstrip(' ')
    return f'{prefix}{body}{suffix}'
