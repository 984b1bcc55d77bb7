"""The message bodies of `RecallDataCodec`, written once for every backend: put, get, touch, scopes, stats, prune.
More in docs/design/store.md.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from temporal_recall.errors import ConfigurationError, PruneRefused, StoreReadOnly, counted

from ._checks import check_optional_id
from .protocol import BODY_TOUCH_INTERVAL
from .sql._bulk import insert_rows
from .sql._keys import scope_key, scope_of_key
from .sql._session import Backend, Session

__all__ = (
    'PRUNE_BATCH',
    'PRUNE_MARGIN',
    'BodyEngine',
    'BodyScopeStats',
    'PruneResult',
    'StoredBodies',
    'check_prune_window',
)

PRUNE_MARGIN = timedelta(days=1)
"""How much longer than the stated retention a body must be untouched before `prune` may delete it.

It covers twice `BODY_TOUCH_INTERVAL` (a body in use may look that much older than it is), clock skew
between the workers that stamp `touched_at`, and a history read just as its retention ends."""

PRUNE_BATCH = 1000
"""Bodies deleted per transaction, so a prune of a large table never holds one long write lock."""

_TOUCH_SECONDS = int(BODY_TOUCH_INTERVAL.total_seconds())

_BODY_COLUMNS = (('scope_key', 'text'), ('content_hash', 'text'), ('body', 'bytea'), ('touched_at', 'bigint'))
_PUT_CONFLICT = (
    'ON CONFLICT (scope_key, content_hash) DO UPDATE SET touched_at = excluded.touched_at '
    f'WHERE message_bodies.touched_at < excluded.touched_at - {_TOUCH_SECONDS}'
)
"""A stored body is never rewritten, only touched, and at most once an interval."""
_SELECT = 'SELECT content_hash, body, touched_at FROM message_bodies WHERE scope_key = $1 AND content_hash {hashes}'
_TOUCH = 'UPDATE message_bodies SET touched_at = $3 WHERE scope_key = $1 AND content_hash {hashes} AND touched_at < $4'
_SCOPES = 'SELECT DISTINCT scope_key FROM message_bodies WHERE content_hash {hashes} ORDER BY scope_key'
"""Read from `message_bodies_by_hash` alone (migration 13), however many bodies the scopes hold."""
_STATS = (
    'SELECT scope_key, count(*), coalesce(sum(length(body)), 0), min(touched_at) FROM message_bodies '
    'GROUP BY scope_key ORDER BY scope_key'
)
_UNTOUCHED = 'SELECT count(*), coalesce(sum(length(body)), 0) FROM message_bodies WHERE touched_at < $1'
_DELETE_BATCH = (
    'DELETE FROM message_bodies WHERE (scope_key, content_hash) IN '
    '(SELECT scope_key, content_hash FROM message_bodies WHERE touched_at < $1 LIMIT $2) '
    # Again on the row itself: on PostgreSQL a body touched after the subquery read it is kept.
    'AND touched_at < $1 RETURNING length(body)'
)


@dataclass(frozen=True, kw_only=True)
class BodyScopeStats:
    """The stored bodies of one tenant scope."""

    scope: str | None
    bodies: int
    bytes: int
    oldest_touched: datetime
    """When the least recently written or read body of the scope was last touched (UTC)."""

    def document(self) -> dict[str, Any]:
        """As JSON: the time in ISO 8601."""
        return {
            'scope': self.scope,
            'bodies': self.bodies,
            'bytes': self.bytes,
            'oldest_touched': self.oldest_touched.isoformat(),
        }


@dataclass(frozen=True, kw_only=True)
class PruneResult:
    """What `prune_bodies` deleted, or with `dry_run` would have deleted."""

    bodies: int
    bytes: int
    cutoff: datetime
    """Bodies last touched before this time (UTC) were (or would be) deleted."""
    dry_run: bool

    def describe(self) -> str:
        verb = 'would delete' if self.dry_run else 'deleted'
        what = f'{counted(self.bodies, "message body", "message bodies")} ({counted(self.bytes, "byte")})'
        return f'{verb} {what} untouched since {self.cutoff.isoformat()}'


def _shown(duration: timedelta) -> str:
    """A duration as `30d`, `36h`, `1d12h30m` (the form the CLI accepts)."""
    seconds = int(duration.total_seconds())
    parts = [(seconds // 86400, 'd'), (seconds // 3600 % 24, 'h'), (seconds // 60 % 60, 'm'), (seconds % 60, 's')]
    return ''.join(f'{value}{unit}' for value, unit in parts if value) or '0s'


def check_prune_window(older_than: timedelta, retention: timedelta) -> None:
    """Refuse a prune window that could delete bodies a history within `retention` still references.

    Raises:
        PruneRefused: `older_than` is shorter than `retention` plus `PRUNE_MARGIN`.
        ConfigurationError: `retention` is not positive.
    """
    if retention <= timedelta(0):
        raise ConfigurationError(
            f'The retention must be positive, got {_shown(retention)}: state the Temporal namespace history '
            'retention (plus the longest time a workflow stays open), e.g. 30d.'
        )
    shortest = retention + PRUNE_MARGIN
    if older_than < shortest:
        raise PruneRefused(
            f'Refusing to prune bodies untouched for {_shown(older_than)}: that is shorter than the retention '
            f'{_shown(retention)} plus the {_shown(PRUNE_MARGIN)} safety margin, so histories Temporal still '
            f'keeps may reference them. Use an older-than window of at least {_shown(shortest)}.'
        )


def _utc(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


class BodyEngine:
    """The body rules over one store's `Backend`."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend

    async def put(self, scope: str | None, bodies: dict[str, bytes]) -> None:
        """Store bodies by hash; a stored body is never rewritten, only touched (at most once an interval)."""
        check_optional_id(scope, 'scope')
        if not bodies:
            return
        key, now = scope_key(scope), int(time.time())
        # Sorted, so concurrent writers on PostgreSQL lock shared rows in the same order.
        pairs = sorted(bodies.items())

        async def write(session: Session) -> None:
            rows = [(key, content_hash, body, now) for content_hash, body in pairs]
            await insert_rows(session, 'message_bodies', _BODY_COLUMNS, rows, on_conflict=_PUT_CONFLICT)

        await self._backend.run_write(write)

    async def get(self, scope: str | None, hashes: Sequence[str]) -> dict[str, bytes]:
        """The stored bodies among `hashes`, within `scope` only; the ones read are touched.

        The touch is throttled to once per `BODY_TOUCH_INTERVAL`: a replay or the codec server reads the
        same bodies again and again, and writing a timestamp at every read would turn each of those
        reads into a write transaction (on SQLite, one that waits for the single writer lock). A read
        finds the stale ones in its result, so a hot read writes nothing. A read-only store is read
        without touching: prune decisions rest on the writes, which always touch.
        """
        check_optional_id(scope, 'scope')
        if not hashes:
            return {}
        key, now = scope_key(scope), int(time.time())

        async def read(session: Session) -> Sequence[Sequence[Any]]:
            dialect = session.dialect
            return await session.rows(_SELECT.format(hashes=dialect.in_array(2, 'text')), key, dialect.array(hashes))

        rows = await self._backend.run_read(read, snapshot=False)
        stale = sorted(row[0] for row in rows if row[2] < now - _TOUCH_SECONDS)
        if stale:

            async def touch(session: Session) -> None:
                dialect = session.dialect
                sql = _TOUCH.format(hashes=dialect.in_array(2, 'text'))
                await session.run(sql, key, dialect.array(stale), now, now - _TOUCH_SECONDS)

            with contextlib.suppress(StoreReadOnly):
                await self._backend.run_write(touch)
        return {row[0]: bytes(row[1]) for row in rows}

    async def scopes(self, hashes: Sequence[str]) -> list[str | None]:
        """The scopes holding any of the bodies `hashes` (in scope key order), for a reader of every scope.

        Nothing is touched: this says where bodies are, it reads none of them.
        """
        if not hashes:
            return []

        async def read(session: Session) -> Sequence[Sequence[Any]]:
            dialect = session.dialect
            return await session.rows(_SCOPES.format(hashes=dialect.in_array(1, 'text')), dialect.array(hashes))

        return [scope_of_key(row[0]) for row in await self._backend.run_read(read, snapshot=False)]

    async def stats(self) -> list[BodyScopeStats]:
        """Count, bytes and oldest touch of the stored bodies, per scope (in scope key order)."""

        async def read(session: Session) -> Sequence[Sequence[Any]]:
            return await session.rows(_STATS)

        return [
            BodyScopeStats(
                scope=scope_of_key(row[0]), bodies=int(row[1]), bytes=int(row[2]), oldest_touched=_utc(row[3])
            )
            for row in await self._backend.run_read(read)
        ]

    async def prune(self, older_than: timedelta, *, retention: timedelta, dry_run: bool = False) -> PruneResult:
        """Delete the bodies untouched for longer than `older_than`, `PRUNE_BATCH` per transaction.

        Refused (`PruneRefused`, nothing read or changed) when `older_than` is shorter than `retention`
        plus `PRUNE_MARGIN`. With `dry_run`, counts what would be deleted and changes nothing.
        """
        check_prune_window(older_than, retention)
        cutoff = int(time.time() - older_than.total_seconds())
        if dry_run:

            async def count(session: Session) -> Sequence[Any] | None:
                return await session.one(_UNTOUCHED, cutoff)

            found = await self._backend.run_read(count)
            assert found is not None
            return PruneResult(bodies=int(found[0]), bytes=int(found[1]), cutoff=_utc(cutoff), dry_run=True)

        async def delete(session: Session) -> Sequence[Sequence[Any]]:
            return await session.rows(_DELETE_BATCH, cutoff, PRUNE_BATCH)

        bodies = size = 0
        while True:
            deleted = await self._backend.run_write(delete)
            bodies, size = bodies + len(deleted), size + sum(int(row[0]) for row in deleted)
            if len(deleted) < PRUNE_BATCH:
                return PruneResult(bodies=bodies, bytes=size, cutoff=_utc(cutoff), dry_run=False)


class StoredBodies:
    """The `BodyStore` methods of a store class, and the lifecycle ones, delegating to its `BodyEngine`."""

    _bodies: BodyEngine

    async def put_bodies(self, scope: str | None, bodies: dict[str, bytes]) -> None:
        """Store message bodies by hash; a body already stored is not rewritten (see `BodyEngine.put`)."""
        await self._bodies.put(scope, bodies)

    async def get_bodies(self, scope: str | None, hashes: Sequence[str]) -> dict[str, bytes]:
        """The stored bodies among `hashes`, within `scope` only (see `BodyEngine.get`)."""
        return await self._bodies.get(scope, hashes)

    async def body_scopes(self, hashes: Sequence[str]) -> list[str | None]:
        """The scopes holding any of the message bodies `hashes` (see `BodyEngine.scopes`)."""
        return await self._bodies.scopes(hashes)

    async def body_stats(self) -> list[BodyScopeStats]:
        """Count, bytes and oldest last use of the codec's message bodies, per scope."""
        return await self._bodies.stats()

    async def prune_bodies(self, older_than: timedelta, *, retention: timedelta, dry_run: bool = False) -> PruneResult:
        """Delete message bodies not written or read for longer than `older_than` (see `BodyEngine.prune`).

        Raises:
            PruneRefused: `older_than` is shorter than `retention` (the Temporal namespace's history
                retention, plus the longest time a workflow stays open) plus `PRUNE_MARGIN`.
        """
        return await self._bodies.prune(older_than, retention=retention, dry_run=dry_run)
