"""A store indexed by the previous release (analyzer version 1, schema 4) answers correctly once upgraded.

`tests/data/store_v4.json` holds every table of a store written by that release's own code (see
`tests/data/make_store_v4.py`), and what it answered to some English queries. It is loaded into a
fresh store of each backend at schema 4; opening it with the current code applies migration 5,
which rebuilds the index with analyzer version 2. After that, CJK, accented and full-width text the
old index could not find is found, the harness summary it had indexed is not, the speech transcript
it ignored is found, a repeated message is found at each of its positions, and the English answers
are the old ones, hit for hit and score for score.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from temporal_recall.models import SearchRequest
from temporal_recall.search import ANALYZER
from temporal_recall.search.plan import search_index
from temporal_recall.store.postgres import _dialect as _postgres_dialect
from temporal_recall.store.sqlite import _dialect as _sqlite_dialect

from ._support import AnyStore, PostgresSite, Site, SqliteSite, with_options

FIXTURE = json.loads((Path(__file__).parents[1] / 'data' / 'store_v4.json').read_text())
BYTES_COLUMNS = {'content_hash', 'term_ids', 'body'}
IDENTITIES = {
    'tenants': 'tenant_id',
    'runs': 'run_key',
    'entries': 'entry_key',
    'conversations': 'conv_key',
    'documents': 'doc_id',
    'terms': 'term_id',
}


def rows_of(table: str) -> tuple[list[str], list[list[Any]]]:
    data = FIXTURE['tables'][table]
    columns: list[str] = data['columns']
    rows = [
        [
            bytes.fromhex(value) if column in BYTES_COLUMNS and value is not None else value
            for column, value in zip(columns, row, strict=True)
        ]
        for row in data['rows']
    ]
    return columns, rows


async def load_v4(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    """Create the site's store at schema 4, then fill every table with the fixture's rows."""
    assert FIXTURE['schema_version'] == 4
    with monkeypatch.context() as patched:
        patched.setattr(_sqlite_dialect, 'MIGRATIONS', _sqlite_dialect.MIGRATIONS[:4])
        patched.setattr(_postgres_dialect, 'MIGRATIONS', _postgres_dialect.MIGRATIONS[:4])
        store = await site.open()
        await store.close()
    if isinstance(site, SqliteSite):
        with closing(sqlite3.connect(site.path)) as db:
            for table in FIXTURE['tables']:
                columns, rows = rows_of(table)
                if rows:
                    marks = ', '.join('?' * len(columns))
                    db.executemany(f'INSERT INTO {table} ({", ".join(columns)}) VALUES ({marks})', rows)
            db.commit()
        return
    assert isinstance(site, PostgresSite)
    import asyncpg

    connection = await asyncpg.connect(with_options(site.base_url.partition('?')[0]))
    try:
        await connection.execute(f'SET search_path TO "{site.schema}"')
        async with connection.transaction():
            for table in FIXTURE['tables']:
                columns, rows = rows_of(table)
                if rows:
                    marks = ', '.join(f'${index}' for index in range(1, len(columns) + 1))
                    await connection.executemany(f'INSERT INTO {table} ({", ".join(columns)}) VALUES ({marks})', rows)
            for table, column in IDENTITIES.items():
                await connection.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), (SELECT max({column}) FROM {table}))"
                )
    finally:
        await connection.close()


async def search(store: AnyStore, query: str, conversation: str = 'multilingual') -> list[tuple[int, str]]:
    result = await search_index(store, SearchRequest(query=query, conversation_id=conversation, scope='acme', limit=10))
    return [(hit.position, hit.excerpt) for hit in result.hits]


async def analyzer_recorded(site: Site) -> str | None:
    sql = "SELECT value FROM index_settings WHERE name = 'analyzer'"
    if isinstance(site, SqliteSite):
        with closing(sqlite3.connect(site.path)) as db:
            row = db.execute(sql).fetchone()
        return None if row is None else str(row[0])
    assert isinstance(site, PostgresSite)
    import asyncpg

    connection = await asyncpg.connect(with_options(site.base_url.partition('?')[0]))
    try:
        await connection.execute(f'SET search_path TO "{site.schema}"')
        return await connection.fetchval(sql)
    finally:
        await connection.close()


async def test_a_store_indexed_by_analyzer_1_answers_correctly_after_the_upgrade(
    site: Site, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    await load_v4(site, monkeypatch)
    with caplog.at_level(logging.INFO, logger='temporal_recall.store'):
        store = await site.open()
    try:
        reindexing = [record.getMessage() for record in caplog.records if 'reindexing' in record.getMessage()]
        assert reindexing, 'the upgrade reports its progress'
        assert reindexing[-1].endswith('16 of 16 entries done.')

        assert await search(store, '天気') == [(0, '東京の天気は晴れです。')]
        assert [position for position, _ in await search(store, '주소')] == [5]
        assert [position for position, _ in await search(store, 'andern')] == [7]
        assert [position for position, _ in await search(store, 'ABC-123')] == [7]
        # The summary the old analyzer indexed is gone; the transcript it ignored is found.
        assert await search(store, 'zebras') == []
        assert [position for position, _ in await search(store, 'noon call')][:2] == [8, 9]
        # The repeated message is found where it was said each time.
        assert [position for position, _ in await search(store, 'repeat this exactly')] == [2, 4]

        for query, answers in FIXTURE['english_answers'].items():
            result = await search_index(
                store, SearchRequest(query=query, conversation_id='english', scope='acme', limit=10)
            )
            assert [[hit.entry_id, hit.position, hit.score] for hit in result.hits] == answers, query
    finally:
        await store.close()
    assert await analyzer_recorded(site) == ANALYZER.key
