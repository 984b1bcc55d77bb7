"""`recall search --branches`: the conversation as it stands by default, and what its branches hold on request."""

from __future__ import annotations

from pathlib import Path

from temporal_recall.store import open_store

from ..store._support import answered_twice
from ._support import recall_async


async def test_search_finds_a_replaced_answer_only_with_branches(tmp_path: Path) -> None:
    path = tmp_path / 'recall.db'
    store = await open_store(path)
    try:
        await answered_twice(
            store, 'ferry', None, 'when does the ferry leave?', 'at nine from Mallaig', 'at noon from Armadale'
        )
    finally:
        await store.close()

    async def positions(*args: str) -> list[int]:
        ran = await recall_async('search', *args, '--store', path, '--format', 'json')
        assert ran.returncode == 0, ran
        return [hit['position'] for hit in ran.json()['hits']]

    assert await positions('ferry', 'Mallaig') == []
    assert await positions('ferry', 'Mallaig', '--branches') == [1]
    assert await positions('all', 'Mallaig') == []
    assert await positions('all', 'Mallaig', '--branches') == [1]
    assert await positions('ferry', 'Armadale') == [1]
    assert await positions('ferry', 'Armadale', '--branches') == [1]
    table = await recall_async('search', 'ferry', 'Mallaig', '--store', path)
    assert 'No matches' in table.stdout, table
