"""Conversation stores: pydantic-ai's `ConversationStore` plus the delta writer and index reader seams.

The package is an engine, which holds the rules once, and a driver per backend, which holds only
that backend's SQL and its connection and transaction handling.

Engine (backend-neutral):
- `_protocol`: the seams the layers above use (`DeltaWriter`, `IndexReader`, `ImpactReader`,
  `BodyStore`, `RecallStore`) and their dataclasses.
- `_append`: appending a delta (attach point, hash check, idempotency, fences, revision);
  `_write`: `write_record` (revision check, new entries, what to index);
  `_context`: context walks; `_integrity`: the integrity check; `_checks`: input validation;
  `_serialization`, `_rows`, `_ids`: what is stored and how rows look in between;
  `_bodies`: the payload codec's message bodies (put, get, touch, stats, prune).
- `_driver.WriteDriver`: what a backend implements so the write rules run on it.

Drivers (one family per backend, `_sqlite_*` and `_postgres_*`): `_*_write` implements
`WriteDriver`; `_*_db` opens connections and runs transactions (SQLite: one thread hop per
transaction; PostgreSQL: a pool, retries of serialisation failures); `_*_schema` and `_*_migrate`
hold the DDL and apply it; `_*_log`, `_*_index` and `_*_reader` hold the statements of history
reads, indexing and searching, which are not yet lifted into the engine; `_sqlite` and `_postgres`
are the store classes that tie them together.

To add a backend: write those driver modules for it (start with `_*_write`, whose protocol is
the contract), a store class like `SqliteConversationStore`, and an `open_store` URL scheme; run
the conformance, parity, concurrency, crash and bad-input suites against it.

The backends are imported lazily, on first use of their names. `temporal_recall.search` and the
workflow modules import the pure `_protocol` dataclasses from this package, and Temporal's workflow
sandbox must never see a database driver (tests/workflows/test_sandbox.py checks it). `open_store`
imports asyncpg only when it opens a `postgresql://` URL. The store imports nothing above it: only
`errors`, `content`, `_validation` and `text` (tests/test_import_graph.py checks it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._protocol import (
    AppendRequest,
    AppendResult,
    DeltaWriter,
    DocumentRow,
    Fence,
    IndexReader,
    IndexStats,
    Posting,
    RecallStore,
    SearchTarget,
)

if TYPE_CHECKING:
    from ._bodies import BodyScopeStats, PruneResult
    from ._integrity import CheckReport, Finding
    from ._open import open_store
    from ._postgres import PostgresConversationStore, PostgresStoreStats
    from ._sqlite import SqliteConversationStore, StoreStats

__all__ = (
    'AppendRequest',
    'AppendResult',
    'BodyScopeStats',
    'CheckReport',
    'DeltaWriter',
    'DocumentRow',
    'Fence',
    'Finding',
    'IndexReader',
    'IndexStats',
    'PostgresConversationStore',
    'PostgresStoreStats',
    'Posting',
    'PruneResult',
    'RecallStore',
    'SearchTarget',
    'SqliteConversationStore',
    'StoreStats',
    'open_store',
)

_LAZY = {
    'BodyScopeStats': '._bodies',
    'PruneResult': '._bodies',
    'CheckReport': '._integrity',
    'Finding': '._integrity',
    'open_store': '._open',
    'SqliteConversationStore': '._sqlite',
    'StoreStats': '._sqlite',
    'PostgresConversationStore': '._postgres',
    'PostgresStoreStats': '._postgres',
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
