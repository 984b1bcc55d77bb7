"""The tiers a process's searches decoded (`postings._tiers`), kept for its next searches.

A pruned search of common words reads each word's tier: tens of thousands of postings in hundreds of
block rows, the larger part of its time at a million messages (docs/design/store.md, "Tiers kept in
memory"). The same common words come back query after query, and a tier changes only when a write
changes it. So each tier decoded is kept here under the version its state row had (`TierState.version`,
changed by every write to the tier, in the same transaction); a search uses it only while the row still
holds that version, and reads the tier again otherwise. Pending postings are never kept: they change
without the tier.

Hand-written rather than `functools.lru_cache`: the entries are weighed by the postings they hold (a
deeper tier weighs twice a top one), and looked up by version.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from ..protocol import PostingColumns

__all__ = ('TIER_CACHE_POSTINGS', 'TierCache')

TIER_CACHE_POSTINGS = 1 << 22
"""The most postings a store's cache keeps (20 bytes each as decoded: 80 MiB). At a million messages a query reads
at most four tiers of 64k to 128k postings, so it holds the tiers of the thirty-odd commonest words."""


class TierCache:
    """Decoded tiers by `(tenant_id, term_id, deep)`, each with its version; the least recently used go
    first once they hold more than `most_postings`. Safe to share between threads (SQLite reads on
    threads of their own)."""

    def __init__(self, most_postings: int = TIER_CACHE_POSTINGS) -> None:
        if most_postings < 0:
            raise ValueError(f'most_postings must not be negative, not {most_postings}.')
        self.most_postings = most_postings
        self._held = 0
        self._entries: OrderedDict[tuple[int, int, bool], tuple[int, PostingColumns]] = OrderedDict()
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
            if found is None or found[0] != version:
                return None
            self._entries.move_to_end(key)
            return found[1]

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
                self._held -= len(before[1].doc_ids)
            self._entries[key] = (version, tier)
            self._held += size
            while self._held > self.most_postings:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._held -= len(dropped.doc_ids)
