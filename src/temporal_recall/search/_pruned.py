"""The exact BM25 top-k of a scope-wide search from the top tiers of long posting lists (`store.postings._tiers`).

A tiered term's postings outside its tier weigh at most its frontier's best pair under this search's
parameters and statistics (`rest`); in a document whose length is known, at most what the best pair not
shorter than it weighs at that length (`_caps`). So every document scores at least what the postings read
give it (`lower`), and at most that plus that cap of each tiered term it was not read under (`upper`). The
`limit`-th best lower bound is at most the page's last score: a document whose upper bound is below it
cannot be on the page, nor tie with it. If no document outside the tiers can reach it either, the few
documents left in doubt have their postings of the other terms looked up, and the page is ranked by
`rank_columns` over documents whose every posting is known: the same additions in the same order as the
exhaustive ranking, so the same hits, scores and ties. Otherwise (or when too much is left in doubt) the
store reads further down the lists that have a deeper tier, and the bounds are made again from there;
where no list has one left, it reads every posting and the ranking is the exhaustive one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from temporal_recall.search._bm25 import BM25Parameters, ScoredDocument, term_idf
from temporal_recall.search._bm25_arrays import array_weights, found_in, kth_largest, rank_columns
from temporal_recall.search._bm25_arrays import union_of as _union
from temporal_recall.search._contenders import contenders, every_document
from temporal_recall.store.protocol import PostingColumns, TieredPostings

__all__ = ('CHOOSE_FROM', 'LOOKUP_ROUND', 'MOST_LOOKUPS', 'MOST_WHOLE', 'SAFETY', 'TierPruning')

MOST_LOOKUPS = 8192
"""The most (term, document) postings a search looks up, in rounds; past that it reads further down the lists
instead (`TierPruning._read_further`), and goes on. Where more are in doubt than that and a deeper tier is
left to read, it reads further first."""

MOST_WHOLE = 0
"""The most lists a search reads whole before it reads every posting instead. At a million messages
(docs/design/store.md, "Top tiers") one whole list saved a fifth of the median of four-word queries but
cost half again at p95, where bounding a million documents a second time costs more than ranking them
all; so none by default."""

LOOKUP_ROUND = 64
"""The most documents in doubt looked up in the first round, those of highest upper bound first: their exact
scores raise the threshold, which often rules out the rest without reading them. Each round after looks up
at most twice as many as the one before: few where the best few settle the page, and few rounds where they
do not. A first round of 512 looked up more than most four-word queries needed (docs/design/store.md, "Lookups
in rounds that grow"); since documents are capped by their length (`_caps`), fewer are in doubt, and a first
round of 64 looked up a third fewer postings than 128 ("Caps by document length")."""

CHOOSE_FROM = 65_536
"""From this many postings in the lists on, only the documents that can reach the page are bounded
(`search._contenders`); below it merging them all costs less than choosing."""

SAFETY = 1e-9
"""How far below the threshold (relative) a bound must lie to rule a document out: the bounds add the
same weights in another order than the ranking, which may differ in the last bits."""


@dataclass
class _Term:
    name: str
    doc_ids: NDArray[np.int64]
    weights: NDArray[np.float64]
    rest: float | None
    """The most a posting outside `doc_ids` weighs; `None` when `doc_ids` is the whole list."""
    lengths: NDArray[np.uint32]
    """The lengths of the documents of `doc_ids`."""
    frontier: NDArray[np.uint32] | None
    idf: float


@dataclass
class _Bounds:
    """The documents read so far that can reach the page (every one, where every list was merged), with what
    is known of their scores."""

    candidates: NDArray[np.int64]
    lower: NDArray[np.float64]
    """The weights read, added up: at most the document's score."""
    unread: dict[str, NDArray[np.bool_]]
    """Per tiered term, the documents whose posting of it (if any) is neither in its tier nor looked up."""
    rests: dict[str, float]
    """Per tiered term, the most a posting of it outside what was read weighs in any document."""
    caps: dict[str, NDArray[np.float64]]
    """Per tiered term, the most its posting (if any) outside what was read weighs in each document, given the
    document's length (`_caps`): at most the term's rest."""

    def keep(self, kept: NDArray[np.bool_]) -> None:
        """Forget the documents not `kept`: once their upper bound is below the threshold, later rounds only
        raise the threshold and lower the bounds, so they can never come back into doubt."""
        self.candidates, self.lower = np.compress(kept, self.candidates), np.compress(kept, self.lower)
        self.unread = {name: np.compress(kept, unread) for name, unread in self.unread.items()}
        self.caps = {name: np.compress(kept, cap) for name, cap in self.caps.items()}

    def missing(self) -> NDArray[np.float64]:
        """What each document's score may still lack: the caps of the terms it was not read under."""
        missing = np.zeros(len(self.candidates))
        for name, unread in self.unread.items():  # A product, not a masked add: one pass, no gather.
            missing += unread * self.caps[name]  # Adding 0.0 where read changes no sum.
        return missing


@dataclass
class TierPruning:
    """One pruned ranking: the store calls `lookups` (`TieredIndex.tiered_postings`) until it answers `{}`
    (the page is proven) or `None` (read every posting), then `rank` ranks what it read."""

    terms: Sequence[str]
    parameters: BM25Parameters
    limit: int
    _bounds: _Bounds | None = field(default=None, init=False)
    _asked: dict[str, NDArray[np.int64]] = field(default_factory=dict[str, 'NDArray[np.int64]'], init=False)
    """The documents of the last round of lookups, per term."""
    _looked_up: int = field(default=0, init=False)
    _rounds: int = field(default=0, init=False)
    """The rounds of lookups asked so far."""
    _read_under: dict[str, NDArray[np.int64]] = field(default_factory=dict[str, 'NDArray[np.int64]'], init=False)
    """Every document looked up under each term, found or not."""
    _whole: bool = field(default=False, init=False)
    """The last round read lists further down (a deeper tier or a whole list): the bounds are made afresh."""
    _wholes: int = field(default=0, init=False)
    """The lists read whole so far (at most `MOST_WHOLE`)."""
    _page: NDArray[np.int64] | None = field(default=None, init=False)
    """The documents the page is ranked among: every one whose score can reach it, each fully read."""

    def _weights(self, read: TieredPostings, name: str, columns: PostingColumns) -> NDArray[np.float64]:
        stats = read.stats
        return array_weights(
            columns.term_frequencies,
            columns.lengths,
            term_idf(stats.document_count, read.frequencies[name]),
            self.parameters.k1,
            self.parameters.b,
            stats.total_length / stats.document_count,
        )

    def _first(self, read: TieredPostings) -> _Bounds | None:
        """The bounds of what the tiers and the whole lists hold; `None` when no term has a tier."""
        stats = read.stats
        average_length = stats.total_length / stats.document_count
        k1, b = self.parameters.k1, self.parameters.b
        terms: list[_Term] = []
        for name in dict.fromkeys(self.terms):
            columns = _merged(read.known.get(name), read.looked_up.get(name))
            frontier = read.frontiers.get(name)
            if columns is None and frontier is None:
                continue
            idf = term_idf(stats.document_count, read.frequencies[name])
            if columns is None:
                doc_ids, weights, lengths = np.empty(0, dtype=np.int64), np.empty(0), np.empty(0, dtype=np.uint32)
            else:
                doc_ids, frequencies, lengths = columns
                if not frequencies.all():  # A stored frequency is at least 1: no copies unless one is not.
                    keep = frequencies > 0
                    doc_ids, frequencies, lengths = doc_ids[keep], frequencies[keep], lengths[keep]
                weights = array_weights(frequencies, lengths, idf, k1, b, average_length)
            rest = None
            if frontier is not None:
                rest = float(array_weights(frontier[:, 0], frontier[:, 1], idf, k1, b, average_length).max(initial=0.0))
            terms.append(_Term(name, doc_ids, weights, rest, lengths, frontier, idf))
        if not any(term.rest for term in terms):
            return None  # Every list read whole (or every tier holds its whole list).
        lists = [(term.doc_ids, term.weights, term.rest or 0.0) for term in terms]
        chosen = None
        if sum(len(term.doc_ids) for term in terms) >= CHOOSE_FROM:
            chosen = contenders(lists, self.limit, SAFETY)  # Only the documents that can still reach the page.
        if chosen is None:
            chosen = every_document(lists)
        candidates, lower = chosen.doc_ids, chosen.lower
        unread = {term.name: ~held for term, held in zip(terms, chosen.held, strict=True) if term.rest}
        for name, unknown in unread.items():
            if (asked := self._read_under.get(name)) is not None:  # Looked up and not found: absent.
                unknown[_positions(candidates, asked)] = False
        rests = {term.name: term.rest for term in terms if term.rest}
        lengths = _lengths(terms, candidates, chosen.held)
        caps = {
            term.name: _caps(term.frontier, lengths, term.idf, k1, b, average_length, term.rest)
            for term in terms
            if term.rest and term.frontier is not None
        }
        return _Bounds(candidates, lower, unread, rests, caps)

    def _follow(self, read: TieredPostings, bounds: _Bounds) -> None:
        """Add the last round's lookups: each asked document is now read under its term, found or not."""
        for name, asked in self._asked.items():
            at = np.searchsorted(bounds.candidates, asked)
            bounds.unread[name][at] = False
            found = read.looked_up.get(name)
            if found is None or not len(found.doc_ids):
                continue
            fresh = np.isin(found.doc_ids, asked, assume_unique=True) & (found.term_frequencies > 0)
            columns = PostingColumns(found.doc_ids[fresh], found.term_frequencies[fresh], found.lengths[fresh])
            bounds.lower[np.searchsorted(bounds.candidates, columns.doc_ids)] += self._weights(read, name, columns)

    def lookups(self, read: TieredPostings) -> Mapping[str, NDArray[np.int64] | None] | None:
        """What to read next: per tiered term, the documents (ascending) whose postings of it to look up, or
        `None` to read further down its list; `{}` once the page is proven, `None` to read every posting."""
        if read.stats.document_count <= 0:
            return {}
        if self._bounds is None or self._whole:
            self._whole = False
            self._bounds = self._first(read)  # Afresh after reading further: it adds documents.
            if self._bounds is None:
                return {}
        else:
            self._follow(read, self._bounds)
        bounds = self._bounds
        candidates, lower = bounds.candidates, bounds.lower
        if len(candidates) < self.limit:
            return None  # Fewer documents read than the page holds: one outside every tier may be on it.
        threshold = kth_largest(lower, self.limit)
        floor = threshold * (1 - SAFETY)
        missing = bounds.missing()
        upper = lower + missing
        outside = sum(bounds.rests.values())
        if outside >= kth_largest(upper, self.limit):
            # No lookup can prove the page: the page's last score is at most the larger of the `limit`-th best
            # upper bound and `outside` (what a document outside every tier may score), so the threshold
            # never rises past `outside`. Deciding now spares the rounds of lookups.
            return self._read_further(read, max(bounds.rests, key=bounds.rests.__getitem__))
        doubtful = (missing > 0) & (upper >= floor)
        if not doubtful.any():
            if outside < floor:
                self._page = candidates[(missing == 0) & (lower >= floor)]
                self._asked = {}
                return {}
            # A document outside every tier might still reach the page: the list of the largest bound, further.
            return self._read_further(read, max(bounds.rests, key=bounds.rests.__getitem__))
        unread_doubtful = {name: int((doubtful & unread).sum()) for name, unread in bounds.unread.items()}
        lacking = max(unread_doubtful, key=unread_doubtful.__getitem__)
        if self._looked_up + sum(unread_doubtful.values()) > MOST_LOOKUPS and _deeper(read, bounds):
            # Too many in doubt to look up one by one, and a deeper tier to read: read further first.
            return self._read_further(read, lacking)
        # The likeliest to reach the page first: their exact scores raise the threshold the most, and often
        # rule the rest out unread. As many as the budget of lookups still allows.
        chosen = np.flatnonzero(doubtful)
        chosen = chosen[np.argsort(-upper[chosen], kind='stable')[: self._round_size()]]
        costs = np.zeros(len(chosen), dtype=np.int64)
        for unread in bounds.unread.values():
            costs += unread[chosen]
        chosen = chosen[np.cumsum(costs) <= MOST_LOOKUPS - self._looked_up]
        if not len(chosen):
            return self._read_further(read, lacking)  # The budget is spent: the list most of them lack, further.
        pick = np.zeros(len(candidates), dtype=bool)
        pick[chosen] = True
        live = upper >= floor  # Every document in doubt, the chosen ones and the best lower bounds among them.
        bounds.keep(live)
        pick = np.compress(live, pick)
        asked = {name: np.compress(pick & unread, bounds.candidates) for name, unread in bounds.unread.items()}
        self._asked = {name: doc_ids for name, doc_ids in asked.items() if len(doc_ids)}
        self._looked_up += sum(len(doc_ids) for doc_ids in self._asked.values())
        self._rounds += 1
        for name, doc_ids in self._asked.items():
            before = self._read_under.get(name)
            self._read_under[name] = doc_ids if before is None else _union([before, doc_ids])
        return self._asked

    def _round_size(self) -> int:
        """How many documents in doubt this round may look up: `LOOKUP_ROUND`, doubled each round after the
        first, up to the budget of lookups (`MOST_LOOKUPS`)."""
        return min(LOOKUP_ROUND << min(self._rounds, 16), MOST_LOOKUPS)

    def _read_further(self, read: TieredPostings, name: str) -> Mapping[str, NDArray[np.int64] | None] | None:
        """Ask to read further down the lists: the bound of `name` leaves the page in doubt, or too many
        documents lack it. Every bounded term with a deeper tier not read yet is read down to it at once
        (the bounds of several terms together decide, and one round costs less than one per term); when
        none has, the whole list of `name`, up to `MOST_WHOLE` of them; past that, every posting."""
        assert self._bounds is not None
        deeper = _deeper(read, self._bounds)
        if not deeper:
            if self._wholes >= MOST_WHOLE:
                return None
            self._wholes += 1
            deeper = [name]
        self._whole = True
        self._asked = {}
        return dict.fromkeys(deeper)

    def rank(self, read: TieredPostings) -> list[ScoredDocument]:
        """The page: ranked among the documents that can reach it, each fully read (every document of every
        list when the store read every posting), by `rank_columns`."""
        if not read.frontiers or self._page is None:
            return rank_columns(read.stats, read.known, read.frequencies, self.terms, self.parameters, self.limit)
        columns: dict[str, PostingColumns] = {}
        for name in read.known.keys() | read.looked_up.keys():  # The page's few postings, not whole tiers merged.
            known, looked_up = (
                _among(found, self._page) if found is not None else None
                for found in (read.known.get(name), read.looked_up.get(name))
            )
            merged = _merged(known, looked_up)
            assert merged is not None
            columns[name] = merged
        return rank_columns(read.stats, columns, read.frequencies, self.terms, self.parameters, self.limit)


def _lengths(
    terms: Sequence[_Term], candidates: NDArray[np.int64], held: Sequence[NDArray[np.bool_]]
) -> NDArray[np.uint32]:
    """Each candidate's document length, read from a list holding it: a posting records its document's
    length, whatever the term, and every candidate was read in one list at least (0 if none: no cap)."""
    lengths = np.zeros(len(candidates), dtype=np.uint32)
    for term, holds in zip(terms, held, strict=True):
        if holds.any():
            lengths[holds] = term.lengths[np.searchsorted(term.doc_ids, candidates[holds])]
    return lengths


def _caps(
    frontier: NDArray[np.uint32],
    lengths: NDArray[np.uint32],
    idf: float,
    k1: float,
    b: float,
    average_length: float,
    rest: float,
) -> NDArray[np.float64]:
    """The most a posting of a term outside its tier can weigh in documents of these `lengths`.

    Every such posting `(tf, L)` has a frontier pair `(tf', l')` with `tf' >= tf` and `l' <= L` (the
    frontier's pairs dominate what lies below the cut), and BM25 weighs more the higher the frequency:
    so it weighs at most `w(tf*, L)`, `tf*` the highest frequency of a pair no longer than `L`. Where no
    pair is that short, the document holds no such posting (0). The rest is the same bound for a document
    of unknown length (that of the best pair at its own length), so a cap is at most the rest; an unknown
    length (0) gets the rest. Documents in doubt are mostly longer than the shortest pairs, and their caps
    lie well below the rest: at a million messages, the slowest four-word queries' documents in doubt fell
    to between a ninth and a half of what the rests left (docs/design/store.md, "Caps by document length")."""
    order = np.argsort(frontier[:, 1], kind='stable')
    shortest = frontier[order, 1].astype(np.int64)
    most = np.maximum.accumulate(frontier[order, 0])  # The highest frequency of a pair at most this long.
    at = np.searchsorted(shortest, lengths.astype(np.int64), side='right') - 1
    fits = at >= 0
    frequencies = np.where(fits, most[np.maximum(at, 0)], 1).astype(np.uint32)  # 1, not 0: k1 may be 0.
    caps = array_weights(frequencies, lengths, idf, k1, b, average_length)
    return np.where(lengths > 0, np.minimum(np.where(fits, caps, 0.0), rest), rest)


def _positions(doc_ids: NDArray[np.int64], wanted: NDArray[np.int64]) -> NDArray[np.intp]:
    """Where the `wanted` ids that ascending `doc_ids` holds sit in it (the others are left out)."""
    at, found = found_in(doc_ids, wanted)
    return at[found]


def _deeper(read: TieredPostings, bounds: _Bounds) -> list[str]:
    """The terms still bounded whose list keeps a deeper tier not read yet."""
    return [term for term in bounds.rests if term in read.deeper]


def _among(columns: PostingColumns, doc_ids: NDArray[np.int64]) -> PostingColumns:
    """The postings of `columns` of the few (ascending) `doc_ids`: found by binary search, not a pass."""
    held = _positions(columns.doc_ids, doc_ids)
    return PostingColumns(columns.doc_ids[held], columns.term_frequencies[held], columns.lengths[held])


def _merged(known: PostingColumns | None, looked_up: PostingColumns | None) -> PostingColumns | None:
    """`known` and `looked_up` postings of one term, ascending ids, each document once."""
    if known is None:
        return looked_up
    if looked_up is None or not len(looked_up.doc_ids):
        return known
    doc_ids = np.concatenate((known.doc_ids, looked_up.doc_ids))
    order = np.argsort(doc_ids, kind='stable')  # Two sorted runs: merged in about linear time.
    doc_ids = doc_ids[order]
    once = order[np.concatenate(([True], doc_ids[1:] != doc_ids[:-1]))]
    return PostingColumns(
        np.concatenate((known.doc_ids, looked_up.doc_ids))[once],
        np.concatenate((known.term_frequencies, looked_up.term_frequencies))[once],
        np.concatenate((known.lengths, looked_up.lengths))[once],
    )
