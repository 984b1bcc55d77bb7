"""Conversation stores: pydantic-ai's `ConversationStore` plus the delta writer and index reader seams.

The package is one engine, which holds every rule and every statement that reads the same on all
backends, and one driver per backend, which holds only what differs: connecting, running a
transaction, and the SQL spelled its own way.

Engine (backend-neutral, runs on a `_session.Session`):
- `_session`: `Session` (one open transaction: `rows`/`one`/`value`/`run`/`many`, `$1` placeholders,
  standard SQL), `Dialect` (the base every driver's dialect subclasses: the spellings that differ,
  the tables' column types, two plan capabilities, and key allocation) and `Backend` (a driver's
  `run_read` / `run_write` / `close`).
- `_store.EngineStore`: the store class, every public method written once over a `Backend`.
- `_protocol`: the seams the layers above use (`DeltaWriter`, `IndexReader`, `BlockReader`,
  `BodyStore`, `RecallStore`) and their dataclasses.
- Writing: `_append` (a delta: attach point, hash check, idempotency, fences, revision), `_write`
  (`write_record`), `_entries` (the log's rows), `_index` (documents, postings, per-term counts,
  tenants, runs), `_blocks` (posting lists in blocks: the layout, its encoding, its reads),
  `_block_writes` (adding postings to their blocks, taking documents out),
  `_membership` (a conversation's index membership, release, `rebuild_index`),
  `_bulk` (batches of rows: one `unnest` on PostgreSQL, one statement per row on SQLite's thread).
- Reading: `_reader` (targets, stats, posting lists as arrays, documents), `_occurrences` and
  `_context` (where a hit was said, and its neighbours),
  `_log` (records, entries, histories, deleting a conversation).
- `_bodies` (the payload codec's message bodies: put, get, touch, stats, prune), `_integrity` (the
  integrity check), `_checks` (input validation), `_statements` (shared statements),
  `_serialization`, `_rows`, `_ids` (what is stored).
- `_schema`: every table, written once with a few placeholders the `Dialect` fills;
  `_migrations`: versions and names; `_migrate`: applying and recording the missing ones.

Driver (per backend; SQLite's shown, PostgreSQL's are the `_postgres_*` twins):
- `_sqlite_db`: the connection, transactions as a `Backend` (the whole transaction on the
  connection thread: one thread hop), its `Session` and error translation.
- `_sqlite_dialect`: `SqliteDialect`, what SQLite spells otherwise (JSON arrays, `CROSS JOIN`,
  `AUTOINCREMENT`, `WITHOUT ROWID`, …) and the `MIGRATIONS` rendered in it; `_sqlite_migrate`:
  opening (file and version checks, serialising concurrent openers) before `_migrate.apply`.
- `_sqlite`: `SqliteConversationStore`, the engine store with its `open()` and `stats()`.

The engine never tests which backend it runs on. Where a rule has two plans — one set-oriented
statement (`unnest` batches, data-modifying CTEs, `LATERAL` probes: best where each statement is a
round trip to a server) or simple statements per row or term with the join order fixed (best
in-process, without a planner's statistics) — the engine module holds both side by side and takes
the one the dialect's capabilities (`Dialect.binds_arrays`, `Dialect.plans_joins`) call for. So each
rule is still written in one place, and a new backend chooses its plans by declaring what it can do.

To add a backend, write its driver and nothing else: a `Dialect` subclass (override what the
database spells otherwise than PostgreSQL, which the defaults are, and implement `allocate_keys`,
`reset_keys`, `lock_tables`); a `Backend` whose `Session` runs the engine's `$n` statements; an
opener that checks the recorded version and calls `_migrate.apply` with `_schema.render(dialect)`
in one serialised transaction; and an `EngineStore` subclass with `open()` and `stats()`. Then add
its URL scheme to `open_store`, and run the conformance, parity, concurrency, crash and bad-input
suites against it (tests/store's `site` fixture).

The backends are imported lazily, on first use of their names. `temporal_recall.search` and the
workflow modules import the pure `_protocol` dataclasses from this package, and Temporal's workflow
sandbox must never see a database driver (tests/workflows/test_sandbox.py checks it). `open_store`
imports asyncpg only when it opens a `postgresql://` URL. The store imports nothing above it: only
`errors`, `content`, `_validation` and `text` (tests/test_import_graph.py checks it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .protocol import (
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
    from ._integrity import CHECK_STEPS, CheckReport, Finding
    from ._open import open_store
    from .postgres._store import PostgresConversationStore, PostgresStoreStats
    from .sqlite._store import SqliteConversationStore, StoreStats

__all__ = (
    'CHECK_STEPS',
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
    'CHECK_STEPS': '._integrity',
    'CheckReport': '._integrity',
    'Finding': '._integrity',
    'open_store': '._open',
    'SqliteConversationStore': '.sqlite._store',
    'StoreStats': '.sqlite._store',
    'PostgresConversationStore': '.postgres._store',
    'PostgresStoreStats': '.postgres._store',
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
