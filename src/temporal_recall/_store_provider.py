"""Reaching the store from activity code without importing it into workflow code.

Agents are defined at module level and imported into the workflow sandbox, so anything an agent's
capability holds is visible to workflow code. The store (and aiosqlite under it) must never be
imported there: it does I/O, and the sandbox would re-import it on every workflow task. A
`StoreProvider` holds only a URL (or, for plain `agent.run` outside Temporal, an already open
store) and opens the store the first time activity code asks for it, importing the backend then.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from .errors import ConfigurationError

if TYPE_CHECKING:
    from .store._protocol import RecallStore

__all__ = ('StoreProvider',)


class StoreProvider:
    """Opens one store per process and event loop, lazily, and hands it to activity code."""

    def __init__(self, url: str | None = None, *, store: RecallStore | None = None) -> None:
        if url is not None and store is not None:
            raise ConfigurationError('StoreProvider takes `url` (e.g. "sqlite:///recall.db") or `store`, not both.')
        self._url = url
        self._fixed = store
        self._opened: dict[tuple[str, int], RecallStore] = {}
        self._lock: asyncio.Lock | None = None

    @classmethod
    def coerce(cls, source: str | StoreProvider | RecallStore | None) -> StoreProvider:
        """A provider for `source`; `None` means the process's default, which a worker configures."""
        if source is None:
            return _DEFAULT
        if isinstance(source, StoreProvider):
            return source
        if isinstance(source, str):
            return cls(source)
        return cls(store=source)

    @classmethod
    def default(cls) -> StoreProvider:
        """The provider used by capabilities and activities built without an explicit store."""
        return _DEFAULT

    def configure(self, url: str | None = None, *, store: RecallStore | None = None) -> None:
        """Point this provider at another store; stores it opened before are left to `aclose`."""
        if (url is None) == (store is None):
            raise ConfigurationError('configure() takes exactly one of `url` or `store`.')
        self._url, self._fixed = url, store

    @property
    def url(self) -> str | None:
        return self._url

    def use(self, store: RecallStore) -> None:
        """Serve `store` from now on (a worker that opened it itself, or a test)."""
        self._fixed = store

    async def get(self) -> RecallStore:
        if self._fixed is not None:
            return self._fixed
        loop_key = (self._url or '', id(asyncio.get_running_loop()))
        store = self._opened.get(loop_key)
        if store is not None:
            return store
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            store = self._opened.get(loop_key)
            if store is None:
                if self._url is None:
                    raise ConfigurationError(
                        'No store is configured: pass `store=` (a URL such as "sqlite:///recall.db") to '
                        'ConversationRecall or RecallActivities, or run inside a worker built with '
                        '`build_worker(store=...)`.'
                    )
                from .store import open_store

                store = await open_store(self._url)
                self._opened[loop_key] = store
        return store

    async def aclose(self) -> None:
        opened, self._opened = list(self._opened.values()), {}
        for store in opened:
            await store.close()


_DEFAULT = StoreProvider()
