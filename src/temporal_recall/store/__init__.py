"""Conversation stores: pydantic-ai's `ConversationStore` plus the delta writer and index reader seams.

One engine holds every rule, written once; a driver per backend holds only what differs. The folders:
`sql` (sessions, dialect base, schema), `postings` (posting blocks), `index` (documents, membership,
search reads), `log` (conversations and entries), `sqlite` and `postgres` (the drivers); at the top,
`protocol` (the public seams), `_engine` (the store class), bodies, integrity, input checks,
migrating and `open_store`. Callers use this package's names and `protocol`, never a private module.
The map, the allowed imports and the design: docs/design/store.md.
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
    ListingPosition,
    Posting,
    RecallStore,
    RecordPage,
    SearchTarget,
)

if TYPE_CHECKING:
    from ._bodies import BodyScopeStats, PruneResult
    from ._open import open_store, sqlite_path
    from .integrity import CHECK_STEPS, CheckReport, Finding
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
    'ListingPosition',
    'PostgresConversationStore',
    'PostgresStoreStats',
    'Posting',
    'PruneResult',
    'RecallStore',
    'RecordPage',
    'SearchTarget',
    'SqliteConversationStore',
    'StoreStats',
    'open_store',
    'sqlite_path',
)

_LAZY = {
    'BodyScopeStats': '._bodies',
    'PruneResult': '._bodies',
    'CHECK_STEPS': '.integrity',
    'CheckReport': '.integrity',
    'Finding': '.integrity',
    'open_store': '._open',
    'sqlite_path': '._open',
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
