"""The tiers a process's searches decoded (`postings._tiers`), kept for its next searches.

A pruned search of common words reads each word's tier: tens of thousands of postings in hundreds of
block rows, the larger part of its time at a million messages (docs/design/store.md, "Tiers kept in
memory"). The same common words come back query after query, and a tier changes only when a write
changes it. So each tier decoded is kept here under the version its state row had (`TierState.version`,
changed by every write to the tier, in the same transaction); a search uses it only while the row still
holds that version, and reads the tier again otherwise. Pending postings change without the tier, so they
are read by every search; what is kept of them is only the last join (`joined`): a tier with its pending
postings joined in, answered again while the pending postings read are the same. Joining copies the whole
tier, several times a pending list's cost (docs/design/store.md, "The last join kept").

Hand-written rather than `functools.lru_cache`: the entries are weighed by the postings they hold (a
deeper tier weighs twice a top one), and looked up by version.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from ..postings._blocks import joined_postings
from ..protocol import PostingColumns

__all__ = ('TIER_CACHE_POSTINGS', 'TierCache')

TIER_CACHE_POSTINGS = 1 << 23
"""The most postings a store's cache keeps (20 bytes each as decoded: 160 MiB), a tier's last join counted
beside it, so a common word with pending postings weighs twice its tier. At a million messages a query reads
at most four tiers of 64k to 128k postings, and the thirty-odd commonest words' tiers with their joins come
to about this much: with half of it, a benchmark's queries of those words kept reading tiers from the store
to their last query (docs/design/store.md, "Tiers kept in memory")."""


class _Kept:
    """A tier at its version, and its last join: the pending postings joined in and the result (`None` until
    a join with pending postings)."""

    __slots__ = ('join', 'tier', 'version')

    def __init__(self, version: int, tier: PostingColumns) -> None:
        self.version = version
        self.tier = tier
        self.join: tuple[PostingColumns, PostingColumns] | None = None

    @property
    def postings(self) -> int:
        """What the entry weighs in the cache: the tier's postings and its last join's."""
        return len(self.tier.doc_ids) + (len(self.join[1].doc_ids) if self.join is not None else 0)


class TierCache:
    """Decoded tiers by `(tenant_id, term_id, deep)`, each with its version; the least recently used go
    first once they hold more than `most_postings`. Safe to share between threads (SQLite reads on
    threads of their own)."""

    def __init__(self, most_postings: int = TIER_CACHE_POSTINGS) -> None:
        if most_postings < 0:
            raise ValueError(f'most_postings must not be negative, not {most_postings}.')
        self.most_postings = most_postings
        self._held = 0
        self._entries: OrderedDict[tuple[int, int, bool], _Kept] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def postings(self) -> int:
        """The postings kept now."""
        return self._held

    def get(self, tenant_id: int, term_id: int, deep: bool, version: int) -> PostingColumns | None:
        """The tier kept for this version, or `None` (none kept, or one of another version)."""
        key = (tenant_id, term_id, deep)
        with self._lock:
            found = self._entries.get(key)
            if found is None or found.version != version:
                return None
            self._entries.move_to_end(key)
            return found.tier

    def joined(
        self, tenant_id: int, term_id: int, deep: bool, version: int, pending: PostingColumns | None
    ) -> PostingColumns | None:
        """The tier kept for this version with `pending` joined in (`joined_postings`), or `None` when none is
        kept for it. The join is kept in place of the last one and answered again while `pending` holds the
        same postings: a common word's pending postings change far less often than it is searched."""
        key = (tenant_id, term_id, deep)
        with self._lock:
            found = self._entries.get(key)
            if found is None or found.version != version:
                return None
            if pending is None or not len(pending.doc_ids):
                return found.tier
            if found.join is not None and _same(found.join[0], pending):
                return found.join[1]
        joined = joined_postings(found.tier, pending)  # Outside the lock: it copies the whole tier.
        for column in (*pending, *joined):
            column.flags.writeable = False
        with self._lock:
            if self._entries.get(key) is found:  # Not dropped or replaced meanwhile.
                self._held -= found.postings
                found.join = (pending, joined)
                self._held += found.postings
                self._drop_beyond_most()
        return joined

    def put(self, tenant_id: int, term_id: int, deep: bool, version: int, tier: PostingColumns) -> None:
        """Keep `tier` (read whole, at `version`), in place of what was kept of it. Its arrays are made
        read-only: every search that uses them shares them."""
        size = len(tier.doc_ids)
        if size > self.most_postings:
            return
        for column in tier:
            column.flags.writeable = False
        key = (tenant_id, term_id, deep)
        with self._lock:
            if (before := self._entries.pop(key, None)) is not None:
                self._held -= before.postings
            self._entries[key] = _Kept(version, tier)
            self._held += size
            self._drop_beyond_most()

    def _drop_beyond_most(self) -> None:
        """Drop the least recently used entries until the rest weigh at most `most_postings` (under the lock)."""
        while self._held > self.most_postings and self._entries:
            _, dropped = self._entries.popitem(last=False)
            self._held -= dropped.postings


def _same(left: PostingColumns, right: PostingColumns) -> bool:
    """Whether two reads of pending postings hold the same postings, column by column."""
    return all(np.array_equal(a, b) for a, b in zip(left, right, strict=True))
