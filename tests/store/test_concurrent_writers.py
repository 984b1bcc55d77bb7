"""Eight processes writing one tenant of a store at once (issue 34): on PostgreSQL their writes run side
by side, on SQLite they take turns at the file's write lock. Afterwards the store is whole, holds
exactly what they wrote, and searches exactly as the same store does after `reindex`.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage

from temporal_recall.models import SearchRequest
from temporal_recall.search.plan import search_index

from . import _tenant_writer
from ._support import AnyStore, SqliteSite, open_site, problems_of, reply, user

WRITERS = 8
STEPS = 14


def _messages(held: list[tuple[str, str]]) -> list[ModelMessage]:
    return [user(text) if role == 'user' else reply(text) for role, text in held]


def _requests(conversations: list[str]) -> list[SearchRequest]:
    words = ('courier parcel', 'invoice order', 'refunded friday', 'noon', 'desk checked', 'unique3x5', 'absent')
    requests = [SearchRequest(query=query, scope=None, all_conversations=True, limit=50) for query in words]
    for conversation in conversations[:: max(1, len(conversations) // 10)]:
        requests += [SearchRequest(query=query, scope=None, conversation_id=conversation, limit=50) for query in words]
    return requests


async def _answers(store: AnyStore, requests: list[SearchRequest]) -> list[Any]:
    return [
        [(hit.conversation_id, hit.entry_id, hit.score) for hit in (await search_index(store, request)).hits]
        for request in requests
    ]


@pytest.mark.parametrize('backend', ['sqlite', pytest.param('postgres', marks=pytest.mark.postgres)])
@pytest.mark.parametrize('seed', [1, 2])
async def test_eight_processes_writing_one_tenant(backend: str, seed: int, tmp_path: Path) -> None:
    async with open_site(backend, tmp_path) as site:
        url = f'sqlite:///{site.path}' if isinstance(site, SqliteSite) else site.url
        store = await site.open()
        await store.close()  # Created and migrated once, before the writers race to open it.
        context = multiprocessing.get_context('spawn')
        start, out = context.Event(), context.Queue()
        processes = [
            context.Process(target=_tenant_writer.run, args=(url, writer, seed, STEPS, start, out))
            for writer in range(WRITERS)
        ]
        for process in processes:
            process.start()
        start.set()
        try:
            written = dict([await asyncio.wait_for(asyncio.to_thread(out.get), timeout=600) for _ in processes])
        finally:
            for process in processes:
                await asyncio.to_thread(process.join, 60)
                if process.is_alive():
                    process.kill()
        assert all(process.exitcode == 0 for process in processes)
        expected = {key: held for each in written.values() for key, held in each.items()}
        store = await site.open()
        try:
            report = await store.check()
            assert report.clean, report.findings
            assert await problems_of(store) == []
            for conversation_id, held in expected.items():  # Nothing lost, nothing doubled.
                loaded = await store.load(conversation_id)
                if held is None:
                    assert loaded is None, conversation_id
                else:
                    assert loaded is not None and loaded.messages == _messages(held), conversation_id
            live = sorted(key for key, held in expected.items() if held is not None)
            requests = _requests(live)
            before = await _answers(store, requests)
            assert sum(map(len, before)) > 100
            await store.reindex()
            assert await _answers(store, requests) == before
            report = await store.check()
            assert report.clean, report.findings
        finally:
            await store.close()
