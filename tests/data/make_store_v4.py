"""Write `store_v4.json`: a store as the release before analyzer version 2 left it (schema 4).

Run it with that release's code, never the current one, for example:

    git archive 50c6b5d src | tar -x -C /tmp/previous
    PYTHONPATH=/tmp/previous/src .venv/bin/python tests/data/make_store_v4.py

It stores a few conversations through that release's `append` (analyzer version 1: word runs,
lower-cased; only `CompactionPart` recognised as a summary; speech transcripts not indexed), records
what that release answered to some English queries, and dumps every table of the SQLite store as
JSON (bytes as hex), which `tests/store/test_analyzer_upgrade.py` loads into either backend at
schema 4 before opening it with the current code.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import tempfile
from contextlib import closing
from pathlib import Path
from typing import Any

from pydantic_ai import messages as m

from temporal_recall.content import content_hash
from temporal_recall.models import SearchRequest
from temporal_recall.search.plan import search_index
from temporal_recall.store import AppendRequest, SqliteConversationStore

HERE = Path(__file__).parent
STAMP = '2026-03-01T10:00:00+00:00'

TABLES = (
    'tenants',
    'runs',
    'entries',
    'conversations',
    'conversation_branches',
    'documents',
    'terms',
    'postings',
    'term_documents',
    'conversation_documents',
    'applied_writes',
    'message_bodies',
)
"""In an order that satisfies the foreign keys when the rows are inserted again."""

ENGLISH_QUERIES = ('invoice 4521', 'refund policy', 'Monday delivery', 'order', 'paid')


def user(text: str) -> m.ModelRequest:
    return m.ModelRequest(parts=[m.UserPromptPart(text, timestamp=m.datetime.fromisoformat(STAMP))])


def assistant(text: str) -> m.ModelResponse:
    return m.ModelResponse(parts=[m.TextPart(text)], timestamp=m.datetime.fromisoformat(STAMP))


MULTILINGUAL: list[list[m.ModelMessage]] = [
    [user('東京の天気は晴れです。'), assistant('Noted: sunny in Tokyo.')],
    [user('repeat this exactly'), assistant('ok')],
    [user('repeat this exactly'), assistant('배송 주소는 서울시 강남구입니다.')],
    [
        m.ModelRequest(parts=[m.SystemPromptPart('Summary of previous conversation:\n\nweather and ZEBRAS.')]),
        assistant('Können Sie bitte die Adresse ändern? ＡＢＣ－１２３'),
    ],
    [
        m.ModelRequest(parts=[m.SpeechPart(speaker='user', transcript='please call me at noon')]),
        assistant('I will call at noon.'),
    ],
]

ENGLISH: list[list[m.ModelMessage]] = [
    [user('Was the invoice for order 4521 paid?'), assistant('Yes, invoice 4521 was paid on Monday.')],
    [user('What is the refund policy?'), assistant('Refunds are free within 30 days of delivery.')],
    [user('When is the delivery of order 7730?'), assistant('Order 7730 arrives Monday; delivery is free.')],
]


async def write(store: SqliteConversationStore, conversation_id: str, steps: list[list[m.ModelMessage]]) -> None:
    history: list[m.ModelMessage] = []
    for number, step in enumerate(steps):
        await store.append(
            AppendRequest(
                conversation_id=conversation_id,
                scope='acme',
                idempotency_key=f'fixture/{conversation_id}/{number}',
                base_length=len(history),
                base_hash=content_hash(history[-1]) if history else None,
                messages=step,
                run_id=f'{conversation_id}-run-{number // 2}',
            )
        )
        history.extend(step)


def dump(path: Path) -> dict[str, Any]:
    with closing(sqlite3.connect(path)) as db:
        version = db.execute('SELECT max(version) FROM schema_migrations').fetchone()[0]
        tables: dict[str, Any] = {}
        for table in TABLES:
            cursor = db.execute(f'SELECT * FROM {table}')
            columns = [column[0] for column in cursor.description]
            rows = [[value.hex() if isinstance(value, bytes) else value for value in row] for row in cursor]
            tables[table] = {'columns': columns, 'rows': rows}
    return {'schema_version': version, 'tables': tables}


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / 'v4.db'
        async with await SqliteConversationStore.open(path) as store:
            await write(store, 'multilingual', MULTILINGUAL)
            await write(store, 'english', ENGLISH)
            answers = {}
            for query in ENGLISH_QUERIES:
                result = await search_index(
                    store, SearchRequest(query=query, conversation_id='english', scope='acme', limit=10)
                )
                answers[query] = [[hit.entry_id, hit.position, hit.score] for hit in result.hits]
        data = dump(path)
    if data['schema_version'] != 4:
        sys.exit(f'Run this with the release whose schema is 4, not {data["schema_version"]} (see the docstring).')
    data['english_answers'] = answers
    (HERE / 'store_v4.json').write_text(json.dumps(data, ensure_ascii=False, indent=1) + '\n')


if __name__ == '__main__':
    asyncio.run(main())
