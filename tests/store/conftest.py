from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic_ai.conversation_store import ConversationStore

from temporal_recall.store import SqliteConversationStore
from temporal_recall.store.postings import _blocks, _tiers

from ._support import STORE_FACTORIES, AnyStore, Site, open_site

BACKENDS = [pytest.param('sqlite'), pytest.param('postgres', marks=pytest.mark.postgres)]
"""The real backends, for tests of what both must do alike (append, index, concurrency, bad input)."""


@pytest.fixture(params=list(STORE_FACTORIES))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ConversationStore]:
    """Each backend in turn, fresh for every test (a new SQLite file in `tmp_path`, a new PostgreSQL schema)."""
    async with STORE_FACTORIES[request.param](tmp_path) as opened:
        yield opened


@pytest.fixture(params=BACKENDS)
async def site(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Site]:
    """Where a fresh store of each real backend lives; `await site.open()` opens another connection to it."""
    async with open_site(request.param, tmp_path) as opened:
        yield opened


@pytest.fixture
async def recall_store(site: Site) -> AsyncIterator[AnyStore]:
    """A fresh store of each real backend in turn."""
    store = await site.open()
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
def small_tiers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tiers of a few postings (`postings._tiers`) in blocks of three, on lists a small test fills:
    `pytest.mark.usefixtures`."""
    monkeypatch.setattr(_blocks, 'TIER_BLOCK', 3)
    monkeypatch.setattr(_tiers, 'TIER', 4)
    monkeypatch.setattr(_tiers, 'LONG', 16)
    monkeypatch.setattr(_tiers, 'DEEP_TIER', 8)
    monkeypatch.setattr(_tiers, 'DEEP_LONG', 32)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / 'recall.db'


@pytest.fixture
async def sqlite_store(db_path: Path) -> AsyncIterator[SqliteConversationStore]:
    store = await SqliteConversationStore.open(db_path)
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The SQL of every statement a store's sessions run, in order, on either backend."""
    from temporal_recall.store.postgres._connection import PostgresSession
    from temporal_recall.store.sqlite._connection import SqliteSession

    sent: list[str] = []
    for session in (PostgresSession, SqliteSession):
        for name in ('rows', 'one', 'value', 'run', 'many'):
            method = getattr(session, name)

            def recorded(self: object, sql: str, *args: object, _method: object = method) -> object:
                sent.append(' '.join(sql.split()))
                return _method(self, sql, *args)  # type: ignore[operator]

            monkeypatch.setattr(session, name, recorded)
    return sent
