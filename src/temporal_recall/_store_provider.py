"""One way to open a store lazily, and the store of the worker an activity runs on.

Agents are defined at module level and imported into the workflow sandbox, so anything an agent's
capability holds is visible to workflow code. The store (and aiosqlite under it) must never be
imported there: it does I/O, and the sandbox would re-import it on every workflow task. A
`StoreProvider` holds only a URL (or an already open store) and opens the store the first time
activity code asks for it, importing the backend then. The worker's `RecallPlugin`, the HTTP API,
the codec and the CLI all open stores through it (and through `open_store` under it).

Which store an activity uses is decided per worker, not per process: `RecallPlugin` puts its
provider in `_WORKER_STORE` around every activity its worker executes (see `worker/_plugin.py`),
and `store_for` reads it there. A `ContextVar` is set inside the activity's own task and is gone
when the activity ends, so two workers with different stores can share one process.
"""

from __future__ import annotations

import asyncio
import os
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from temporalio import activity

from .errors import ConfigurationError, non_retryable

if TYPE_CHECKING:
    from .store.protocol import RecallStore

__all__ = ('StoreProvider', 'store_for')


class StoreProvider:
    """A store named by a URL or path, opened on first use (once per event loop), or an open store.

    It closes only what it opened: an open store handed to it stays the caller's to close.
    """

    def __init__(self, source: str | os.PathLike[str] | RecallStore | Any) -> None:
        # `Any`: an open store may be a `RecallStore` or only what its user reads (the API's `ApiStore`).
        if isinstance(source, str | os.PathLike):
            self._url: str | os.PathLike[str] | None = source
            self._fixed: Any = None
        else:
            self._url, self._fixed = None, source
        self._opened: dict[int, RecallStore] = {}
        self._lock: asyncio.Lock | None = None

    @classmethod
    def coerce(cls, source: str | os.PathLike[str] | StoreProvider | RecallStore | Any) -> StoreProvider:
        return source if isinstance(source, StoreProvider) else cls(source)

    @property
    def url(self) -> str | None:
        return None if self._url is None else str(self._url)

    async def get(self) -> RecallStore:
        if self._fixed is not None:
            return self._fixed
        # asyncpg pools and aiosqlite connections belong to the loop that opened them.
        loop = id(asyncio.get_running_loop())
        store = self._opened.get(loop)
        if store is not None:
            return store
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            store = self._opened.get(loop)
            if store is None:
                from .store import open_store

                assert self._url is not None
                store = self._opened[loop] = await open_store(self._url)
        return store

    async def aclose(self) -> None:
        opened, self._opened = list(self._opened.values()), {}
        for store in opened:
            await store.close()


_WORKER_STORE: ContextVar[StoreProvider | None] = ContextVar('temporal_recall_worker_store', default=None)
"""The running activity's worker's store; set by `RecallPlugin`'s activity interceptor only."""


async def store_for(explicit: StoreProvider | None) -> RecallStore:
    """`explicit` when the capability was given a store, else the store of this activity's worker."""
    provider = explicit if explicit is not None else _WORKER_STORE.get()
    if provider is None:
        error = ConfigurationError(
            'No store: pass `store=` (a URL such as "sqlite:///recall.db", or an open store) to '
            'ConversationRecall for a plain `agent.run`, or run the agent on a worker with '
            '`RecallPlugin(store=...)` (which `build_worker` adds).'
        )
        if activity.in_activity():  # no retry can add a plugin to the worker: fail once, visibly
            raise non_retryable(error) from error
        raise error
    return await provider.get()
