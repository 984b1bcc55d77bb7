"""Tenants and runs: the rows a scope and an agent run are keyed by, created on first use.

Every write locks its tenants (`lock_tenants`) right after its conversation row: shared by writes that
add to the index, which run side by side; exclusive by those that take from it (docs/design/store.md, "Concurrency").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..sql._bulk import intern
from ..sql._keys import scope_key
from ..sql._session import Session

__all__ = ('intern_runs', 'lock_tenants', 'tenant_of')


async def tenant_of(session: Session, scope: str | None, *, lock: bool = False) -> int:
    """The tenant id of `scope`, created on first use (a concurrent creator's row is read back); with `lock`,
    locked shared as `lock_tenants` does, by the statement that finds it where the dialect can."""
    key = scope_key(scope)
    held = session.dialect.lock_tenant_in('tenant_id') if lock else None
    if held is not None:
        row = await session.one(f'SELECT tenant_id, {held} FROM tenants WHERE scope_key = $1', key)  # noqa: S608
        if row is not None:
            return int(row[0])
    found = await session.value('SELECT tenant_id FROM tenants WHERE scope_key = $1', key) if held is None else None
    if found is None:
        found = await session.value(
            'INSERT INTO tenants (scope_key) VALUES ($1) ON CONFLICT (scope_key) DO NOTHING RETURNING tenant_id', key
        )
    if found is None:  # Another transaction created it; our insert waited for its commit, so we can see it now.
        found = await session.value('SELECT tenant_id FROM tenants WHERE scope_key = $1', key)
    if lock:
        await lock_tenants(session, [int(found)])
    return int(found)


async def lock_tenants(session: Session, tenant_ids: Iterable[int], *, exclusive: bool = False) -> None:
    """Lock tenants in id order until the transaction ends: shared (writers of a tenant run side by
    side), or `exclusive` (waits for them all, and they for it). Nothing to do where there is one
    writer at a time anyway (SQLite's `BEGIN IMMEDIATE`)."""
    sql = session.dialect.lock_tenants(exclusive=exclusive)
    if sql is not None:
        await session.run(sql, session.dialect.array(sorted(set(tenant_ids))))


async def intern_runs(
    session: Session, run_ids: Iterable[str | None], known: Mapping[str, int] | None = None
) -> dict[str, int]:
    return await intern(session, 'runs', (run_id for run_id in run_ids if run_id is not None), known)
