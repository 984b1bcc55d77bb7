"""`SqliteConversationStore`: the engine store (`_engine.EngineStore`) on one SQLite file.

More in docs/design/store.md.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Self

from .._engine import EngineStore, StoreSizes, refuse_unopened
from ..protocol import BodyStore, RecallStore
from ._connection import Database, Synchronous
from ._opener import connect

__all__ = ('SqliteConversationStore', 'StoreStats')


@dataclass(frozen=True, kw_only=True)
class StoreStats(StoreSizes):
    """Sizes of a SQLite store, for operators and the storage benchmark.

    `database_bytes` is the pages in use times the page size: the file's size once the WAL is checkpointed.
    """

    path: Path


class SqliteConversationStore(EngineStore):
    """A `ConversationStore` in a SQLite database (WAL mode), which is also a `DeltaWriter` and an `IndexReader`.

    Open it with [`open`][temporal_recall.store.SqliteConversationStore.open] and close it when done
    (or use `async with`). One store holds one connection; several stores, threads or processes may
    use the same file on a local disk, SQLite serialising their writes (each waits up to
    `busy_timeout_ms` for the write lock, then raises `StoreUnavailable`). Nothing else may open the
    file or its `-wal`/`-shm` while a store has it open: see the README's "One SQLite file, many
    stores and processes".

    Durability: `synchronous='NORMAL'` (the default) is crash-safe in WAL mode — a crash or kill never
    corrupts the database or leaves part of a transaction — but a power loss or OS crash may roll back
    the last transactions. Pass `synchronous='FULL'` to make every commit survive power loss too.
    """

    def __init__(self, db: Database) -> None:
        """Use `await SqliteConversationStore.open(path)`; this wraps an already opened database.

        Opening is asynchronous (it connects, checks and migrates), so a constructor cannot do it:
        a path given here is refused at once with a `TypeError` naming the coroutine to await,
        rather than failing on first use.
        """
        if not isinstance(db, Database):  # pyright: ignore[reportUnnecessaryIsInstance]
            shown = repr(os.fspath(db)) if isinstance(db, str | os.PathLike) else 'path'  # pyright: ignore[reportUnknownArgumentType]
            refuse_unopened('SqliteConversationStore', db, shown=shown, noun='a path', argument='path')
        super().__init__(db)
        self._db = db

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = 5000,
        synchronous: Synchronous = 'NORMAL',
        read_only: bool = False,
    ) -> Self:
        """Open the store at `path`, creating it or applying missing migrations if needed.

        Raises:
            NotADatabase: The file exists but is not a SQLite database, or is one without our schema.
            SchemaTooNew: A newer temporal-recall wrote it; nothing was changed.
            StoreReadOnly: `read_only=True` on a database that needs migrating.
            StoreUnavailable: SQLite cannot open the file, or it stayed locked past `busy_timeout_ms`.
        """
        db = await connect(Path(path), busy_timeout_ms=busy_timeout_ms, synchronous=synchronous, read_only=read_only)
        return cls(db)

    @property
    def path(self) -> Path:
        return self._db.path

    @property
    def url(self) -> str:
        """The store's URL, `sqlite:///` and the file's absolute path, without options (as PostgreSQL's `url`)."""
        return f'sqlite:///{self.path.absolute()}'

    async def stats(self) -> StoreStats:
        sizes = await self._sizes('SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()')
        return StoreStats(path=self.path, **sizes)


if TYPE_CHECKING:
    # Makes pyright check that the store satisfies the protocols the activities, the search and the codec use.
    _CONFORMS: type[RecallStore] = SqliteConversationStore
    _BODIES: type[BodyStore] = SqliteConversationStore
