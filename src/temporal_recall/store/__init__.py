"""Conversation stores: pydantic-ai's `ConversationStore` plus the delta writer and index reader seams.

The backends are imported lazily, on first use of their names. `temporal_recall.search` and the
workflow modules import the pure `_protocol` dataclasses from this package, and Temporal's workflow
sandbox must never see a database driver (tests/workflows/test_sandbox.py checks it). `open_store`
imports asyncpg only when it opens a `postgresql://` URL.
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
    from ._integrity import CheckReport, Finding
    from ._open import open_store
    from ._postgres import PostgresConversationStore, PostgresStoreStats
    from ._sqlite import SqliteConversationStore, StoreStats

__all__ = (
    'AppendRequest',
    'AppendResult',
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
    'RecallStore',
    'SearchTarget',
    'SqliteConversationStore',
    'StoreStats',
    'open_store',
)

_LAZY = {
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
