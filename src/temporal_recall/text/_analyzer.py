"""The analyzer: how text becomes the terms the index stores and a query looks up.

One named, versioned pipeline (`ANALYZER`) for documents and queries alike: Unicode word runs (so no
query can be read as search syntax), normalised and case-folded, accents folded, CJK text indexed as
single characters and overlapping pairs, as Lucene's CJK analyzer does, while a query looks up the
pairs. The store records which analyzer built its index and rebuilds it when that changes.
docs/design/store.md ("Text analysis") walks through each step and its reasons.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

__all__ = (
    'ANALYZER',
    'MAX_TERM_LENGTH',
    'Analyzer',
    'normalize_term',
    'query_terms',
    'term_frequencies',
    'term_spans',
    'tokenize',
)


@dataclass(frozen=True)
class Analyzer:
    """Which text analysis built an index; an index built by another one must be rebuilt."""

    name: str
    version: int

    @property
    def key(self) -> str:
        """What a store records, e.g. `unicode-cjk-bigram/2`."""
        return f'{self.name}/{self.version}'


ANALYZER = Analyzer(name='unicode-cjk-bigram', version=2)
"""The analyzer new indexes are built with. Version 1, which an older store may record, was ASCII-minded:
word runs, lower-cased, no normalisation, a whole CJK run as one term."""

MAX_TERM_LENGTH = 64
"""Longer non-CJK word runs (base64 blobs, hashes) are cut to this many characters.

Bounds the size of one posting key; a query term is cut the same way, so it still matches.
"""

_DIACRITICS = '\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f'
"""The Combining Diacritical Marks blocks (and their extensions, supplement, marks for symbols and
half marks): the accents of Latin, Greek and Cyrillic text that accent folding drops."""

_KANA_VOICING = '\u3099\u309a'
"""Combining kana voicing marks: part of the word they follow (`か` + `゙` is `が`), never dropped."""

_CJK = (
    '\u1100-\u11ff'  # Hangul Jamo
    '\u2e80-\u2fdf'  # CJK and Kangxi radicals
    '\u3005\u3007\u3021-\u3029\u3038-\u303b'  # ideographic iteration and number marks
    '\u3041-\u309f'  # Hiragana
    '\u30a1-\u30fa\u30fc-\u30ff'  # Katakana, without the double hyphen and the middle dot
    '\u3131-\u318e'  # Hangul compatibility Jamo
    '\u31f0-\u31ff'  # Katakana phonetic extensions
    '\u3400-\u4dbf'  # CJK unified ideographs extension A
    '\u4e00-\u9fff'  # CJK unified ideographs
    '\ua960-\ua97f'  # Hangul Jamo extended A
    '\uac00-\ud7ff'  # Hangul syllables, Hangul Jamo extended B
    '\uf900-\ufaff'  # CJK compatibility ideographs
    '\U0001b000-\U0001b16f'  # kana supplement and extensions, small kana
    '\U00020000-\U0002fa1f'  # CJK extensions B to F, compatibility supplement
    '\U00030000-\U000323af'  # CJK extensions G and H
)
"""Characters indexed as unigrams and bigrams. Half-width forms are not listed: NFKC has already
made them full-width by the time a run is split."""

_RUN = re.compile(f'[\\w{_DIACRITICS}{_KANA_VOICING}]+')
_DROP = re.compile(f'[{_DIACRITICS}]+')
_PARTS = re.compile(f'([{_CJK}]+)|([^\\W{_CJK}]+)')
"""Within a normalised run: group 1 a CJK part, group 2 any other word part."""

_CACHED_RUN = 64
"""Runs up to this length have their normalisation cached (runs repeat a lot: common words)."""

Span = tuple[str, int, int]


def _fold_uncached(text: str) -> str:
    folded = unicodedata.normalize('NFKD', unicodedata.normalize('NFKC', text).casefold())
    return unicodedata.normalize('NFC', _DROP.sub('', folded))


_fold_cached = lru_cache(maxsize=8192)(_fold_uncached)


def _fold(text: str) -> str:
    """Steps 2 and 3 of the pipeline for one run: NFKC, case folding, accent folding."""
    return _fold_cached(text) if len(text) <= _CACHED_RUN else _fold_uncached(text)


def normalize_term(word: str) -> str:
    """The index spelling of one word: normalised, accent-folded and cut to `MAX_TERM_LENGTH`.

    For a word that is already a term (a query's or the index's), the term itself.
    """
    if word.isascii():
        return word.lower()[:MAX_TERM_LENGTH]
    return _fold(word)[:MAX_TERM_LENGTH]


_WHOLE_RUN = -1
"""In place of folded offsets: the term stands for its whole run."""


def _run_terms(run: str, *, query: bool) -> Iterator[tuple[str, int, int, bool]]:
    """The terms of one word run: `(term, first, last, counted)`.

    `first` and `last` are the offsets, in the folded run, of the term's first and last character
    (`_WHOLE_RUN` for a term made of the whole run); `counted` is whether the term adds a position
    to the document length (a CJK pair does not: it overlaps its characters).
    """
    if run.isascii():
        yield run.lower()[:MAX_TERM_LENGTH], _WHOLE_RUN, _WHOLE_RUN, True
        return
    folded = _fold(run)
    parts = list(_PARTS.finditer(folded))
    if len(parts) == 1 and parts[0].group(2) is not None:
        yield parts[0].group(2)[:MAX_TERM_LENGTH], _WHOLE_RUN, _WHOLE_RUN, True
        return
    for part in parts:
        word = part.group(2)
        base = part.start()
        if word is not None:
            yield word[:MAX_TERM_LENGTH], base, part.end() - 1, True
            continue
        cjk: str = part.group(1)
        if len(cjk) == 1:
            yield cjk, base, base, True
            continue
        for index in range(len(cjk)):
            if not query:
                yield cjk[index], base + index, base + index, True
            if index + 1 < len(cjk):
                yield cjk[index : index + 2], base + index, base + index + 1, False


def _char_bounds(run: str, start: int) -> list[tuple[int, int]] | None:
    """For each character of the folded run, the `(start, end)` in the text of the character it came from.

    `None` when the run cannot be folded character by character (a composition across characters,
    such as Hangul written as separate jamo); its terms are then placed on the whole run.
    """
    bounds: list[tuple[int, int]] = []
    pieces: list[str] = []
    for offset, char in enumerate(run):
        piece = _fold_cached(char)
        pieces.append(piece)
        bounds.extend([(start + offset, start + offset + 1)] * len(piece))
    return bounds if ''.join(pieces) == _fold(run) else None


def term_spans(text: str) -> Iterator[Span]:
    """Each document term of `text` with the `(start, end)` offsets in `text` of what it came from.

    Lazy, so a caller looking for the first match (excerpts) stops scanning as soon as it has it.
    A CJK part gives its characters and pairs in reading order, each at its own place in `text`.
    """
    for match in _RUN.finditer(text):
        run = match.group()
        start, end = match.span()
        bounds: list[tuple[int, int]] | None = None
        aligned: bool | None = None
        for term, first, last, _ in _run_terms(run, query=False):
            if first == _WHOLE_RUN:
                yield term, start, end
                continue
            if aligned is None:
                # Already normal text (CJK, mostly) folds to itself: character for character.
                aligned = _fold(run) == run
                bounds = None if aligned else _char_bounds(run, start)
            if aligned:
                yield term, start + first, start + last + 1
            elif bounds is None:
                yield term, start, end
            else:
                yield term, bounds[first][0], bounds[last][1]


def query_terms(text: str) -> Iterator[str]:
    """The terms a query looks up, in order, repeats kept: CJK parts as pairs only (see module doc)."""
    for match in _RUN.finditer(text):
        for term, _, _, _ in _run_terms(match.group(), query=True):
            yield term


def tokenize(text: str) -> list[str]:
    """The document terms of `text`, in order, repeats kept."""
    return [term for match in _RUN.finditer(text) for term, _, _, _ in _run_terms(match.group(), query=False)]


def term_frequencies(text: str) -> tuple[Counter[str], int]:
    """How often each term occurs in `text`, and the BM25 document length (positions, see module doc)."""
    if text.isascii():
        # Version 1's rule, which is what the pipeline amounts to for ASCII, at its speed.
        terms = [run[:MAX_TERM_LENGTH] for run in _RUN.findall(text.lower())]
        return Counter(terms), len(terms)
    frequencies: Counter[str] = Counter()
    length = 0
    for match in _RUN.finditer(text):
        for term, _, _, counted in _run_terms(match.group(), query=False):
            frequencies[term] += 1
            length += counted
    return frequencies, length
