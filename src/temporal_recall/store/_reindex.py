"""`recall reindex`, written once: the index rebuilt tenant by tenant, each tenant in a transaction of its own.
More in docs/design/store.md ("Bulk reindex").

The rule for writers running meanwhile: a tenant's rebuild holds that tenant's writers out, as a
delete does (its conversations' rows, then the tenant's lock, exclusive), and commits the tenant's
whole new index at once. So a search sees each tenant's old index or its new one, never a part; a
write to a tenant being rebuilt waits for it and then adds to the new index; the other tenants'
writers go on (on SQLite every write waits, one tenant's transaction at a time).

Progress is durable: the tenant last rebuilt is recorded (`index_settings`, `reindex`) in the same
transaction as its index, so a run that stops (a crash, a kill, a failure) leaves every tenant with a
whole index, old or new, and the next run resumes with the tenant after it. The record goes when the
last tenant is done.
"""

from __future__ import annotations

import logging
import time

from .index._rebuild import Progress, count_events, rebuild_tenant, record_analyzer
from .log._tenants import lock_tenants
from .sql._session import Backend, Session

__all__ = ('MARKER', 'reindex_store')

MARKER = 'reindex'
"""The `index_settings` row naming the tenant an unfinished `recall reindex` rebuilt last."""

LOG_EVERY = 10.0
"""Seconds between two log lines of one tenant's rebuild (its batches commit with the tenant, at its end)."""

_log = logging.getLogger('temporal_recall.store')


async def reindex_store(backend: Backend, store: str, progress: Progress | None = None) -> int:
    """Rebuild every tenant's index from the log, tenant by tenant (see the module notes), resuming an
    unfinished run where it stopped. `progress(done, total)` counts membership events over the run's
    tenants. Returns the store's document count."""
    resumed = await backend.run_read(_last_done)
    tenants = await backend.run_read(lambda session: _events_per_tenant(session, resumed))
    run = _Run(store, progress, sum(tenants.values()))
    if resumed is not None:
        _log.info('Store %s: resuming an unfinished reindex after tenant %d.', store, resumed)
    _log.info('Store %s: reindexing %d tenants, %d membership events.', store, len(tenants), run.total)
    run.report(0)
    for tenant_id in sorted(tenants):
        run.start(tenants[tenant_id])
        await backend.run_write(lambda session, tenant_id=tenant_id: _rebuild(session, tenant_id, run.tenant_moved))
        run.finish(tenant_id, len(tenants))
    await backend.run_write(_finish)
    run.report(run.total)
    return int(await backend.run_read(_documents))


class _Run:
    """A run's progress over its tenants, counted before it starts (the total changes only if writers
    change a tenant's events before its turn); logged once per tenant (logger `temporal_recall.store`, INFO)."""

    def __init__(self, store: str, progress: Progress | None, total: int) -> None:
        self.store, self.progress, self.total = store, progress, total
        self.done = self.guess = self.tenants = 0
        self.started = self.logged = time.monotonic()

    def report(self, done: int) -> None:
        if self.progress is not None:
            self.progress(done, self.total)

    def start(self, guess: int) -> None:
        self.guess = guess

    def tenant_moved(self, done: int, total: int) -> None:
        """The tenant's rebuild's progress (`done` of its `total` events)."""
        if total != self.guess:
            self.total += total - self.guess
            self.guess = total
        self.report(self.done + done)
        now = time.monotonic()
        if now - self.logged >= LOG_EVERY and done < total:  # A large tenant: its batches are logged too.
            self.logged = now
            _log.info(
                'Store %s: reindexing, %d of %d membership events done, %.0f a second.',
                self.store, self.done + done, self.total, (self.done + done) / max(now - self.started, 1e-9),
            )  # fmt: skip

    def finish(self, tenant_id: int, tenants: int) -> None:
        self.done += self.guess
        self.tenants += 1
        self.logged = time.monotonic()
        rate = self.done / max(self.logged - self.started, 1e-9)
        _log.info(
            'Store %s: reindexed tenant %d (%d of %d); %d of %d membership events done, %.0f a second.',
            self.store, tenant_id, self.tenants, tenants, self.done, self.total, rate,
        )  # fmt: skip


async def _last_done(session: Session) -> int | None:
    value = await session.value('SELECT value FROM index_settings WHERE name = $1', MARKER)
    return None if value is None else int(value)


async def _events_per_tenant(session: Session, after: int | None) -> dict[int, int]:
    """The tenants to rebuild (those after `after`, in id order), each with its number of membership events."""
    counted = await count_events(session)
    rows = await session.rows('SELECT tenant_id FROM tenants WHERE tenant_id > $1', -1 if after is None else after)
    return {int(row[0]): counted.get(int(row[0]), 0) for row in rows}


async def _rebuild(session: Session, tenant_id: int, progress: Progress) -> int:
    """One tenant's rebuild in the caller's transaction: its writers held out, then its index rebuilt, then
    its place in the run recorded."""
    # The order every writer takes them in: conversation rows first, then the tenant (log._tenants).
    await session.rows(
        f'SELECT conv_key FROM conversations WHERE tenant_id = $1 ORDER BY conv_key{session.dialect.for_update}',  # noqa: S608
        tenant_id,
    )
    await lock_tenants(session, [tenant_id], exclusive=True)
    replayed = await rebuild_tenant(session, tenant_id, progress)
    await session.run(
        'INSERT INTO index_settings (name, value) VALUES ($1, $2) '
        'ON CONFLICT (name) DO UPDATE SET value = excluded.value',
        MARKER,
        str(tenant_id),
    )
    return replayed


async def _finish(session: Session) -> None:
    await record_analyzer(session)
    await session.run('DELETE FROM index_settings WHERE name = $1', MARKER)


async def _documents(session: Session) -> int:
    return int(await session.value('SELECT count(*) FROM documents'))
