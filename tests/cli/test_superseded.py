"""`recall search --superseded`: what a retry replaced inside one run is searched on request only; `--branches`,
the old name, still works and says it is deprecated."""

from __future__ import annotations

from pathlib import Path

from temporal_recall.store import open_store

from ..store._support import answered_twice
from ._support import recall_async


async def test_search_finds_a_replaced_answer_only_with_superseded(tmp_path: Path) -> None:
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
        deprecated = 'warning: --branches is renamed --superseded' in ran.stderr
        assert deprecated == ('--branches' in args), ran.stderr
        return [hit['position'] for hit in ran.json()['hits']]

    assert await positions('ferry', 'Mallaig') == []
    assert await positions('ferry', 'Mallaig', '--superseded') == [1]
    assert await positions('all', 'Mallaig') == []
    assert await positions('all', 'Mallaig', '--superseded') == [1]
    assert await positions('ferry', 'Armadale') == [1]
    assert await positions('ferry', 'Armadale', '--superseded') == [1]
    assert await positions('ferry', 'Mallaig', '--branches') == [1]
    table = await recall_async('search', 'ferry', 'Mallaig', '--store', path)
    assert 'No matches' in table.stdout, table
