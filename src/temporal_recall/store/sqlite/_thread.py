"""The SQLite store's connection thread, which never keeps a process alive. More in docs/design/store.md."""

from __future__ import annotations

import atexit
import sqlite3
import threading
import warnings
import weakref
from pathlib import Path
from typing import Any

import aiosqlite
import aiosqlite.core

__all__ = ('EXIT_CLOSE_SECONDS', 'RecallConnection')

EXIT_CLOSE_SECONDS = 2.0
"""How long interpreter exit waits for each still-open connection to close before leaving it to the OS."""

_END_THREAD: Any = aiosqlite.core._STOP_RUNNING_SENTINEL  # pyright: ignore[reportPrivateUsage]
"""What a queued call returns to make aiosqlite's connection thread finish."""

_OPEN: weakref.WeakSet[RecallConnection] = weakref.WeakSet()
"""Connections nobody has closed yet."""

_CLOSING: set[threading.Thread] = set()
"""Threads told to close without anyone waiting (by the finaliser); exit gives them time to finish."""


class RecallConnection(aiosqlite.Connection):
    """An aiosqlite connection on a daemon thread, closed at exit or collection if nobody closed it."""

    def __init__(self, path: str | Path, **sqlite_options: Any) -> None:
        def connector() -> sqlite3.Connection:
            return sqlite3.connect(str(path), **sqlite_options)

        super().__init__(connector, iter_chunk_size=64)
        self._thread.daemon = True
        _OPEN.add(self)

    def close_without_loop(self, wait_seconds: float | None = None) -> None:
        """Close the database on its own thread and end the thread, without an event loop.

        For the exit hook and the finaliser, which run after the store's event loop is gone. Waits up
        to `wait_seconds` for the thread to finish (not at all when `None`). Does nothing once closed.
        """
        _OPEN.discard(self)
        if self._connection is None or not self._thread.is_alive():
            return
        self._running = False
        self._tx.put_nowait((None, self._close_on_thread))
        if wait_seconds is not None:
            self._thread.join(wait_seconds)
        else:
            _CLOSING.difference_update([thread for thread in _CLOSING if not thread.is_alive()])
            _CLOSING.add(self._thread)

    def _close_on_thread(self) -> Any:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()
        return _END_THREAD

    async def close(self) -> None:
        _OPEN.discard(self)
        await super().close()

    def __del__(self) -> None:
        if self._connection is not None:
            # Hidden by default, shown under `-X dev` and by pytest: a store should be closed.
            warnings.warn(
                f'A store connection was not closed: {self!r}; use `async with` or `close()`.',
                ResourceWarning,
                stacklevel=1,
            )
        self.close_without_loop()


@atexit.register
def _close_open_connections() -> None:
    for connection in list(_OPEN):
        connection.close_without_loop(EXIT_CLOSE_SECONDS)
    for thread in list(_CLOSING):
        thread.join(EXIT_CLOSE_SECONDS)
