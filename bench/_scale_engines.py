"""The engines the scale benchmark feeds the same texts to: ours (a store URL), SQLite FTS5 and tantivy.

Each engine takes a `Unit` (one hundred messages) in two calls: `prepare`, untimed (building the
pydantic-ai messages, rows or documents), and `write`, timed. Each offers one or more searches
(`searches`: a label and a function of the query terms returning `(conversation, position)` hits).

- Ours writes through the public store API only: one `append` of the hundred messages (user prompts
  and assistant texts alternating), the fastest path the API offers; it searches through the product's
  search entry point (`search_index` with a `SearchRequest`), as the activity, tool, CLI and API do.
- FTS5: one table (`body`, and the conversation and position unindexed), WAL and `synchronous=NORMAL`
  as our SQLite store, one transaction per hundred; ranked by `bm25()`. Two searches: OR ("the best 10
  messages holding any term", the question ours answers) and AND (for reference).
- tantivy (the bench extra): the `default` tokenizer, body stored as FTS5 stores it, one writer
  thread with a 50 MB heap; a commit at every tenth of the fill and the merges waited for at the end.
  Searches OR of the terms, the 10 best.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from bench._scale_corpus import LONG_CONVERSATION, Unit
from temporal_recall.content import content_hash
from temporal_recall.models import SearchRequest
from temporal_recall.search import plan
from temporal_recall.search.plan import search_index  # the product's search entry point
from temporal_recall.store import AppendRequest, open_store

__all__ = (
    'SCOPE',
    'Engine',
    'Fts5',
    'Ours',
    'Search',
    'Tantivy',
    'drop_schema',
    'search_index',
    'tantivy_missing',
    'vacuum_schema',
    'with_schema',
)

SCOPE = 'bench'
LIMIT = 10
TANTIVY_HEAP = 50_000_000

Hits = list[tuple[str, int]]
Search = Callable[[list[str]], Awaitable[Hits]]


class Engine:
    """What the runner drives: `prepare` (untimed), `write` (timed), `searches`, `bytes`, `close`."""

    name: str
    searches: dict[str, Search]

    def prepare(self, unit: Unit) -> Any:
        raise NotImplementedError

    async def write(self, prepared: Any) -> None:
        raise NotImplementedError

    async def tenth_done(self) -> None:
        """Called at each tenth of the fill, inside the timed write of that tenth."""

    async def finish(self) -> None:
        """After the last write, timed as part of the last tenth (tantivy's merges)."""

    async def bytes(self) -> int:
        raise NotImplementedError

    async def close(self) -> None:
        pass


def _messages(texts: list[str]) -> list[ModelMessage]:
    return [
        ModelRequest(parts=[UserPromptPart(text)]) if index % 2 == 0 else ModelResponse(parts=[TextPart(text)])
        for index, text in enumerate(texts)
    ]


EVERY_POSTING = ', every posting'
"""The label suffix of our scope-wide search reading every posting (`Ours(every_posting=True)`)."""


class Ours(Engine):
    """A temporal-recall store: `sqlite` (a temporary file) or a `postgresql://` URL (a fresh schema).
    With `every_posting`, a second search reads every posting (`EVERY_POSTING`)."""

    def __init__(self, store: Any, label: str, *, every_posting: bool = False) -> None:
        self.store = store
        self.name = label
        self.last: dict[str, ModelMessage] = {}
        self.searches = {label: self.search}
        if every_posting:
            self.searches[label + EVERY_POSTING] = self.search_every_posting

    @classmethod
    async def open(cls, url: str, label: str, *, every_posting: bool = False) -> Ours:
        return cls(await open_store(url), label, every_posting=every_posting)

    def prepare(self, unit: Unit) -> AppendRequest:
        messages = _messages(unit.texts)
        previous = self.last.get(unit.conversation)
        self.last[unit.conversation] = messages[-1]
        return AppendRequest(
            conversation_id=unit.conversation,
            scope=SCOPE,
            idempotency_key=f'bench/{unit.conversation}/{unit.first}',
            base_length=unit.first,
            base_hash=content_hash(previous) if previous is not None else None,
            messages=messages,
            run_id=f'{unit.conversation}-run-{unit.first // 100}',
        )

    async def write(self, prepared: AppendRequest) -> None:
        await self.store.append(prepared)
        if prepared.conversation_id != LONG_CONVERSATION:
            self.last.pop(prepared.conversation_id, None)  # bounded memory: only the long one continues

    async def search(self, terms: list[str]) -> Hits:
        request = SearchRequest(query=' '.join(terms), scope=SCOPE, all_conversations=True, limit=LIMIT)
        return [(hit.conversation_id, hit.position) for hit in (await search_index(self.store, request)).hits]

    async def search_every_posting(self, terms: list[str]) -> Hits:
        """`search` reading every posting instead of the top tiers (`search._pruned`): the path of the commits
        before the tiers, unchanged, timed beside the pruned one in the same run."""
        tiered = plan._spans_tenant  # pyright: ignore[reportPrivateUsage]
        plan._spans_tenant = lambda target: False  # pyright: ignore[reportPrivateUsage]
        try:
            return await self.search(terms)
        finally:
            plan._spans_tenant = tiered  # pyright: ignore[reportPrivateUsage]

    async def search_conversation(self, terms: list[str], conversation: str) -> Hits:
        request = SearchRequest(query=' '.join(terms), scope=SCOPE, conversation_id=conversation, limit=LIMIT)
        return [(hit.conversation_id, hit.position) for hit in (await search_index(self.store, request)).hits]

    async def bytes(self) -> int:
        return (await self.store.stats()).database_bytes

    async def close(self) -> None:
        await self.store.close()


def _phrase(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


class Fts5(Engine):
    """SQLite FTS5 over the same texts, in a file of its own."""

    name = 'FTS5'

    def __init__(self, path: Path) -> None:
        self.path = path
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute('PRAGMA journal_mode=WAL')
        self.db.execute('PRAGMA synchronous=NORMAL')
        self.db.execute(
            'CREATE VIRTUAL TABLE IF NOT EXISTS messages USING fts5(body, conversation UNINDEXED, position UNINDEXED)'
        )
        self.searches = {'FTS5 OR': self.search_or, 'FTS5 AND': self.search_and}

    def prepare(self, unit: Unit) -> list[tuple[str, str, int]]:
        return [(text, unit.conversation, unit.first + index) for index, text in enumerate(unit.texts)]

    async def write(self, prepared: list[tuple[str, str, int]]) -> None:
        self.db.execute('BEGIN')
        self.db.executemany('INSERT INTO messages (body, conversation, position) VALUES (?, ?, ?)', prepared)
        self.db.execute('COMMIT')

    def _search(self, match: str) -> Hits:
        rows = self.db.execute(
            'SELECT conversation, position FROM messages WHERE messages MATCH ? ORDER BY bm25(messages) LIMIT ?',
            (match, LIMIT),
        )
        return [(conversation, int(position)) for conversation, position in rows]

    async def search_or(self, terms: list[str]) -> Hits:
        return self._search(' OR '.join(map(_phrase, terms)))

    async def search_and(self, terms: list[str]) -> Hits:
        return self._search(' '.join(map(_phrase, terms)))

    async def bytes(self) -> int:
        self.db.execute('PRAGMA wal_checkpoint(TRUNCATE)')
        pages = (
            self.db.execute('PRAGMA page_count').fetchone()[0] - self.db.execute('PRAGMA freelist_count').fetchone()[0]
        )
        return pages * self.db.execute('PRAGMA page_size').fetchone()[0]

    async def close(self) -> None:
        self.db.close()


def tantivy_missing() -> str | None:
    """Why the tantivy row cannot run, or None when it can."""
    try:
        import tantivy  # noqa: F401  # pyright: ignore[reportMissingImports]
    except ImportError:
        return (
            'tantivy row skipped: tantivy is not installed. It is a bench-only extra, never a product '
            "dependency: `.venv/bin/pip install -e '.[bench]'` (or `.venv/bin/pip install tantivy`)."
        )
    return None


class Tantivy(Engine):
    """tantivy (PyPI `tantivy`) over the same texts, in a directory of its own."""

    name = 'tantivy'

    def __init__(self, directory: Path) -> None:
        import tantivy  # pyright: ignore[reportMissingImports]

        self.tantivy = tantivy
        self.directory = directory
        builder = tantivy.SchemaBuilder()
        builder.add_text_field('body', stored=True, tokenizer_name='default')
        builder.add_text_field('conversation', stored=True, tokenizer_name='raw')
        builder.add_unsigned_field('position', stored=True)
        self.schema = builder.build()
        self.index = tantivy.Index(self.schema, path=str(directory))
        self.writer: Any = self.index.writer(heap_size=TANTIVY_HEAP, num_threads=1)
        self.searches = {'tantivy OR': self.search_or}

    def prepare(self, unit: Unit) -> list[Any]:
        document = self.tantivy.Document
        return [
            document(body=text, conversation=unit.conversation, position=unit.first + index)
            for index, text in enumerate(unit.texts)
        ]

    async def write(self, prepared: list[Any]) -> None:
        for document in prepared:
            self.writer.add_document(document)

    async def tenth_done(self) -> None:
        self.writer.commit()

    async def finish(self) -> None:
        self.writer.commit()
        self.writer.wait_merging_threads()
        self.writer = None
        self.index.reload()
        self.searcher: Any = self.index.searcher()

    async def search_or(self, terms: list[str]) -> Hits:
        query_type = self.tantivy.Query
        should = self.tantivy.Occur.Should
        query = query_type.boolean_query(
            [(should, query_type.term_query(self.schema, 'body', term.lower())) for term in terms]
        )
        hits: Hits = []
        for _score, address in self.searcher.search(query, LIMIT).hits:
            document = self.searcher.doc(address)
            hits.append((document['conversation'][0], document['position'][0]))
        return hits

    async def bytes(self) -> int:
        return sum(path.stat().st_size for path in self.directory.rglob('*') if path.is_file())


def with_schema(url: str, schema: str) -> str:
    parts = urlsplit(url)
    query = [(name, value) for name, value in parse_qsl(parts.query, keep_blank_values=True) if name != 'schema']
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode([*query, ('schema', schema)]), ''))


async def _on_database(url: str, statements: Callable[[Any], Awaitable[None]]) -> None:
    import asyncpg

    parts = urlsplit(url)
    connection = await asyncpg.connect(urlunsplit((parts.scheme, parts.netloc, parts.path, '', '')))
    try:
        await statements(connection)
    finally:
        await connection.close()


async def vacuum_schema(url: str, schema: str) -> None:
    """`VACUUM ANALYZE` every table of the schema: what autovacuum does on a server where it is on."""

    async def vacuum(connection: Any) -> None:
        tables = await connection.fetch('SELECT tablename FROM pg_tables WHERE schemaname = $1', schema)
        for row in tables:
            await connection.execute(f'VACUUM ANALYZE "{schema}"."{row[0]}"')

    await _on_database(url, vacuum)


async def drop_schema(url: str, schema: str) -> None:
    async def drop(connection: Any) -> None:
        await connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    await _on_database(url, drop)
