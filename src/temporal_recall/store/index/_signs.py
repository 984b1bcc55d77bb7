"""Sign codes: each tenant's vectors as one bit per dimension in memory, for a scope-wide search by meaning.

A search ranks the codes by Hamming distance, then reads only the nearest vectors from the store and
scores them exactly (`_vectors`). The codes are what a process holds per tenant; the vectors stay in
the store, which is their source of truth. More in docs/design/semantic.md, "Searching" and "Scale".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from ..sql._session import Session

__all__ = ('VectorSigns', 'decode', 'nearest_codes', 'sign_codes')

SIGNS_READ = 2048
"""Vectors read per statement while a tenant's codes are built: what one read holds in memory."""
SIGNS_SCANNED = 65_536
"""Codes compared with the query per pass: the pass's temporaries (half a megabyte) stay in the cache."""
HEADROOM = 8
"""A tenant's codes are allocated with an eighth more room than it holds, so the rows added between
two searches are written in place rather than copying every code."""

_BITS_PER_WORD = 64
_BYTE_BITS = np.array([bin(byte).count('1') for byte in range(256)], dtype=np.uint8)
"""Set bits per byte value: the popcount where numpy has no `bitwise_count` (before 2.0)."""


def decode(blobs: Sequence[bytes], scales: Sequence[float], dimensions: int) -> NDArray[np.float32]:
    """Stored vectors as float32 rows (components times scale): scored with one matrix product."""
    if not blobs:
        return np.zeros((0, dimensions), dtype=np.float32)
    components = np.frombuffer(b''.join(bytes(blob) for blob in blobs), dtype=np.int8).reshape(len(blobs), -1)
    return components.astype(np.float32) * np.asarray(scales, dtype=np.float32)[:, None]


def sign_codes(centered: NDArray[np.float32]) -> NDArray[np.uint64]:
    """One bit per dimension, set where the centred component is positive, packed into 64-bit words per row
    (the last word padded with zero bits, which every row and query share)."""
    packed = np.packbits(centered > 0, axis=-1)
    width = -(-packed.shape[-1] // 8) * 8
    if packed.shape[-1] != width:
        padding = [(0, 0)] * (packed.ndim - 1) + [(0, width - packed.shape[-1])]
        packed = np.pad(packed, padding)
    return np.ascontiguousarray(packed).view(np.uint64)


def distances(planes: NDArray[np.uint64], query: NDArray[np.uint64]) -> NDArray[np.uint16]:
    """Hamming distance of every code to `query`. `planes` holds word `w` of every code in row `w`: each
    pass XORs and counts one contiguous run of words at a time into reused buffers, about six times
    faster than counting code by code, whose reduction runs over a handful of words per row."""
    total = planes.shape[1]
    found = np.empty(total, dtype=np.uint16)
    differing = np.empty(min(total, SIGNS_SCANNED), dtype=np.uint64)
    bits = np.empty(len(differing), dtype=np.uint8)
    for start in range(0, total, SIGNS_SCANNED):
        stop = min(total, start + SIGNS_SCANNED)
        width = stop - start
        counted = found[start:stop]
        for word in range(planes.shape[0]):
            np.bitwise_xor(planes[word, start:stop], query[word], out=differing[:width])
            if hasattr(np, 'bitwise_count'):
                np.bitwise_count(differing[:width], out=bits[:width])
            else:  # numpy 1.26
                bits[:width] = _BYTE_BITS[differing[:width].view(np.uint8)].reshape(width, 8).sum(axis=1)
            if word == 0:
                counted[:] = bits[:width]
            else:
                counted += bits[:width]
    return found


def nearest_codes(found: NDArray[np.uint16], kept: int) -> NDArray[np.intp]:
    """Positions of `kept` of the smallest distances (which of those tied at the last distance taken is
    not defined). A histogram of distances finds the cut in two linear passes: a distance is at most
    the code's bit count, so counting them is cheaper than a partition of a million values."""
    if kept >= len(found):
        return np.arange(len(found))
    cumulative = np.cumsum(np.bincount(found))
    cut = int(np.searchsorted(cumulative, kept))
    below = np.flatnonzero(found < cut)
    return np.concatenate((below, np.flatnonzero(found == cut)[: kept - len(below)]))


class _Buffer:
    """Growable arrays of codes: keys, roles and the codes as word planes, of which `filled` are written.
    Snapshots (`_Signs`) share it and read only their own first `count`; a refresh appends in place
    only when its base is the last snapshot written (`filled == base.count`), otherwise it copies."""

    def __init__(self, words: int, capacity: int) -> None:
        self.keys = np.empty(capacity, dtype=np.int64)
        self.planes = np.empty((words, capacity), dtype=np.uint64)
        self.roles = np.empty(capacity, dtype=np.uint16)
        self.filled = 0

    def append(self, keys: NDArray[np.int64], codes: NDArray[np.uint64], roles: NDArray[np.uint16]) -> None:
        end = self.filled + len(keys)
        if end > len(self.keys):
            self._grow(end + end // HEADROOM)
        self.keys[self.filled : end] = keys
        self.planes[:, self.filled : end] = codes.T
        self.roles[self.filled : end] = roles
        self.filled = end

    def copy(self, count: int, capacity: int) -> _Buffer:
        """A buffer of its own with the first `count` codes of this one."""
        copied = _Buffer(self.planes.shape[0], max(capacity, count))
        copied.keys[:count] = self.keys[:count]
        copied.planes[:, :count] = self.planes[:, :count]
        copied.roles[:count] = self.roles[:count]
        copied.filled = count
        return copied

    def _grow(self, capacity: int) -> None:
        grown = self.copy(self.filled, capacity)
        self.keys, self.planes, self.roles = grown.keys, grown.planes, grown.roles


@dataclass(frozen=True)
class _Signs:
    """A tenant's vectors as sign codes, as of `count` rows up to `last_key`: one snapshot, replaced whole
    when refreshed. 8 bytes of key, 2 of role and one bit per dimension per vector (42 bytes at 256
    dimensions), plus `HEADROOM`; the vectors themselves stay in the store."""

    count: int
    last_key: int
    center: NDArray[np.float32]
    """Subtracted before the signs are taken: the mean of the first vectors read. The texts of one
    tenant share much of their direction (the mean of the benchmark's unit vectors has norm 0.8), and
    signs of the raw vectors mostly record that. Any fixed centre ranks alike (`q·d` and `q·(d - c)`
    differ by the same `q·c` for every document), so it is kept when rows are added."""
    buffer: _Buffer
    role_names: tuple[str, ...]

    @property
    def keys(self) -> NDArray[np.int64]:
        return self.buffer.keys[: self.count]

    @property
    def planes(self) -> NDArray[np.uint64]:
        return self.buffer.planes[:, : self.count]

    @property
    def roles(self) -> NDArray[np.uint16]:
        return self.buffer.roles[: self.count]

    def role_code(self, role: str) -> int | None:
        return self.role_names.index(role) if role in self.role_names else None

    def distances(self, query: NDArray[np.float32]) -> NDArray[np.uint16]:
        """Hamming distance of every code to the code of `query` (a vector of the same space)."""
        return distances(self.planes, sign_codes(query - self.center))


_FRESHNESS = (
    'SELECT (SELECT coalesce(sum(vectors), 0) FROM vector_counts WHERE tenant_id = $1), '
    '(SELECT coalesce(max(vector_key), 0) FROM document_vectors WHERE tenant_id = $1)'
)
"""How many vectors the tenant holds and its highest key: both read from an index, in one snapshot."""


@dataclass
class VectorSigns:
    """Each tenant's vectors as sign codes in memory, for scope-wide searches (see `_Signs`).

    Refreshed at every search from the rows added since (`vector_key` grows with each insert), and
    read again whole when the count says rows were added out of key order (concurrent writers on
    PostgreSQL) or deleted. Rows are only added or deleted, never changed, so codes equal in count
    and last key to the table are the table's. The count is `vector_counts`, kept with the vectors,
    so the check reads a few rows rather than counting the tenant's vectors.
    """

    by_tenant: dict[tuple[int, str, int], _Signs] = field(default_factory=dict[tuple[int, str, int], _Signs])

    async def of(self, session: Session, tenant_id: int, model: str, dimensions: int) -> _Signs:
        key = (tenant_id, model, dimensions)
        cached = self.by_tenant.get(key)
        row = await session.one(_FRESHNESS, tenant_id)
        assert row is not None
        count, last = int(row[0]), int(row[1])
        if cached is not None and (cached.count, cached.last_key) == (count, last):
            return cached
        base = cached if cached is not None and count > cached.count and last > cached.last_key else None
        fresh = await _read(session, tenant_id, dimensions, base, last, count)
        if base is not None and fresh.count != count:
            self.by_tenant.pop(key, None)
            return await self.of(session, tenant_id, model, dimensions)
        self.by_tenant[key] = fresh
        return fresh


async def _read(
    session: Session, tenant_id: int, dimensions: int, base: _Signs | None, last: int, count: int
) -> _Signs:
    """`base` (or nothing) and the tenant's rows after it up to key `last` (`count` rows in all, as the
    table counts them), as sign codes, read `SIGNS_READ` rows at a time so a tenant of a million
    vectors never sits in memory whole. Rows of a first read go straight into a buffer of their own;
    rows added to `base` are gathered, then appended in one step, so a snapshot never shows a part."""
    words = -(-dimensions // _BITS_PER_WORD)
    after = 0 if base is None else base.last_key
    center = None if base is None else base.center
    role_names = [] if base is None else list(base.role_names)
    target = _Buffer(words, count + count // HEADROOM) if base is None else _Buffer(words, count - base.count)
    while True:
        rows = await session.rows(
            'SELECT vector_key, role, vector, scale FROM document_vectors '
            'WHERE tenant_id = $1 AND vector_key > $2 AND vector_key <= $3 ORDER BY vector_key LIMIT $4',
            tenant_id,
            after,
            last,
            SIGNS_READ,
        )
        if not rows:
            break
        vectors = decode([r[2] for r in rows], [float(r[3]) for r in rows], dimensions)
        if center is None:
            center = vectors.mean(axis=0, dtype=np.float32)
        for name in dict.fromkeys(str(r[1]) for r in rows):
            if name not in role_names:
                role_names.append(name)
        codes = {name: index for index, name in enumerate(role_names)}
        target.append(
            np.array([int(r[0]) for r in rows], dtype=np.int64),
            sign_codes(vectors - center),
            np.array([codes[str(r[1])] for r in rows], dtype=np.uint16),
        )
        after = int(rows[-1][0])
        if len(rows) < SIGNS_READ:
            break
    buffer = target if base is None else _joined(base, target)
    total = buffer.filled
    return _Signs(
        count=total,
        last_key=int(buffer.keys[total - 1]) if total else 0,
        center=center if center is not None else np.zeros(dimensions, dtype=np.float32),
        buffer=buffer,
        role_names=tuple(role_names),
    )


def _joined(base: _Signs, added: _Buffer) -> _Buffer:
    """`base`'s codes followed by `added`'s: in `base`'s buffer when nothing was written past it there
    (no await between this check and the append, so no other refresh interleaves), else in a copy."""
    buffer = base.buffer
    if buffer.filled != base.count:
        total = base.count + added.filled
        buffer = buffer.copy(base.count, total + total // HEADROOM)
    buffer.append(added.keys[: added.filled], added.planes[:, : added.filled].T, added.roles[: added.filled])
    return buffer
