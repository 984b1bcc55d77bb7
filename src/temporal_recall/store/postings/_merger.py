"""Merges off the write path: a write that left its tenant's segments due starts one in the background.
More in docs/design/store.md ("Concurrency").
"""

from __future__ import annotations

import asyncio

from ..sql._session import Backend
from ._segments import merge_off_path

__all__ = ('Merger',)


class Merger:
    """A store's background merges (`postings._segments.merge_off_path`), so no caller waits for one.

    At most one task per tenant in this process at a time (another process's merger is kept off by
    the tenant's merge lock, which is only ever tried); `close` waits for the running ones, each
    bounded (`MERGE_BATCH`), before the store's connections close.
    """

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._running: dict[int, asyncio.Task[None]] = {}

    def due(self, tenant_id: int) -> None:
        """Start merging `tenant_id`'s oldest segments, unless this process is at it already."""
        if tenant_id not in self._running:
            self._running[tenant_id] = asyncio.get_running_loop().create_task(self._merge(tenant_id))

    async def _merge(self, tenant_id: int) -> None:
        try:
            await merge_off_path(self._backend, tenant_id)
        finally:
            del self._running[tenant_id]

    async def settle(self) -> None:
        """Wait for the merges running now (and those they leave due are not started: the next write does)."""
        while self._running:
            await asyncio.gather(*self._running.values())
