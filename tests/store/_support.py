"""Messages, store factories and index checks shared by the store tests."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import random
import sqlite3
import uuid
from collections import Counter
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager, closing, contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest
from pydantic_ai import Agent
from pydantic_ai import messages as m
from pydantic_ai.conversation_store import ConversationStore, InMemoryConversationStore
from pydantic_ai.models.function import AgentInfo, FunctionModel

from temporal_recall import ConversationRecall, RecallDeps
from temporal_recall.content import content_hash
from temporal_recall.models import SearchRequest
from temporal_recall.search import BM25Parameters, ScoredDocument, SearchResult, plan, rank
from temporal_recall.search.plan import search_index
from temporal_recall.store import AppendRequest, PostgresConversationStore, SqliteConversationStore
from temporal_recall.store.postings._blocks import decode
from temporal_recall.store.protocol import (
    DeltaWriter,
    Fence,
    IndexReader,
    IndexStats,
    Posting,
    PostingColumns,
    SearchTarget,
)

StoreFactory = Callable[[Path], AbstractAsyncContextManager[ConversationStore]]
AnyStore = SqliteConversationStore | PostgresConversationStore

POSTGRES_URL_VARIABLE = 'TEMPORAL_RECALL_TEST_POSTGRES_URL'
LOCAL_DATABASE = 'temporal_recall_test'
"""The database the tests make their own on a local server when no URL is configured (each test a schema in it)."""


@dataclass(frozen=True)
class PostgresServer:
    """Where the PostgreSQL tests run (`url`), or why they cannot (`url` is None and `missing` says why)."""

    url: str | None
    missing: str = ''


@functools.cache
def postgres_server() -> PostgresServer:
    """`TEMPORAL_RECALL_TEST_POSTGRES_URL` when set; otherwise a database of the tests' own on a server at
    127.0.0.1:5432 as `postgres` (libpq's PGHOST, PGPORT and PGUSER say where else to look), if one lets
    them in. Looked up once per process."""
    url = os.environ.get(POSTGRES_URL_VARIABLE)
    if url:
        return PostgresServer(url)
    env = os.environ
    return local_postgres(env.get('PGHOST', '127.0.0.1'), env.get('PGPORT', '5432'), env.get('PGUSER', 'postgres'))


def local_postgres(host: str, port: str, user: str, database: str = LOCAL_DATABASE) -> PostgresServer:
    """`database` on the server at `host:port`, created if missing, or why there is none to use."""
    import asyncpg

    server = f'postgresql://{user}@{host}:{port}'
    try:
        with ThreadPoolExecutor(1) as thread:  # its own event loop, whether or not the caller runs one
            thread.submit(asyncio.run, _create_database(f'{server}/postgres', database)).result()
    except (OSError, TimeoutError, ValueError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
        return PostgresServer(
            None,
            f'no PostgreSQL server: {POSTGRES_URL_VARIABLE} is not set and none at {host}:{port} let {user!r} in '
            f'({" ".join((str(error) or type(error).__name__).split())}); start one there (PGHOST, PGPORT and '
            f'PGUSER say where to look) or set {POSTGRES_URL_VARIABLE}',
        )
    return PostgresServer(f'{server}/{database}')


async def _create_database(maintenance_url: str, database: str) -> None:
    import asyncpg

    connection = await asyncpg.connect(maintenance_url, timeout=10)
    try:
        if await connection.fetchval('SELECT 1 FROM pg_database WHERE datname = $1', database):
            return
        quoted = await connection.fetchval('SELECT quote_ident($1)', database)
        with suppress(asyncpg.DuplicateDatabaseError, asyncpg.UniqueViolationError):
            await connection.execute(f'CREATE DATABASE {quoted}')  # another test process may be first
    finally:
        await connection.close()


def postgres_url() -> str:
    """The test server's URL, or skip the test: PostgreSQL tests run only where a server is configured or found
    (tests/conftest.py reports all these skips in one line)."""
    server = postgres_server()
    if server.url is None:
        pytest.skip(server.missing)
    return server.url


def with_options(url: str, **options: object) -> str:
    """`url` with store options added to (or replacing those in) its query string."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    for name, value in options.items():
        query[name] = str(value).lower() if isinstance(value, bool) else str(value)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), parts.fragment))


async def drop_schema(url: str, schema: str) -> None:
    import asyncpg

    connection = await asyncpg.connect(with_options(url.partition('?')[0]))
    try:
        await connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await connection.close()


class SqliteSite:
    """Where a test's SQLite store lives: every `open()` is another connection to the same file."""

    backend = 'sqlite'

    def __init__(self, folder: Path) -> None:
        self.path = folder / 'store.db'

    async def open(self) -> SqliteConversationStore:
        return await SqliteConversationStore.open(self.path)

    async def close(self) -> None:
        pass


class PostgresSite:
    """A test's own PostgreSQL schema (`t_<hex>`), dropped afterwards so runs never see each other."""

    backend = 'postgres'

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.schema = f't_{uuid.uuid4().hex}'
        self.url = with_options(base_url, schema=self.schema)

    async def open(self, **options: object) -> PostgresConversationStore:
        return await PostgresConversationStore.open(with_options(self.url, **options))

    async def close(self) -> None:
        await drop_schema(self.base_url, self.schema)


Site = SqliteSite | PostgresSite


@asynccontextmanager
async def open_site(backend: str, folder: Path) -> AsyncGenerator[Site]:
    site: Site = SqliteSite(folder) if backend == 'sqlite' else PostgresSite(postgres_url())
    try:
        yield site
    finally:
        await site.close()


@asynccontextmanager
async def _memory(_: Path) -> AsyncGenerator[ConversationStore]:
    yield InMemoryConversationStore()


@asynccontextmanager
async def _sqlite(folder: Path) -> AsyncGenerator[ConversationStore]:
    store = await SqliteConversationStore.open(folder / 'store.db')
    try:
        yield store
    finally:
        await store.close()


@asynccontextmanager
async def _postgres(folder: Path) -> AsyncGenerator[ConversationStore]:
    async with open_site('postgres', folder) as site:
        store = await site.open()
        try:
            yield store
        finally:
            await store.close()


STORE_FACTORIES: dict[str, StoreFactory] = {'memory': _memory, 'sqlite': _sqlite, 'postgres': _postgres}
"""Every backend the conformance suite runs against, `memory` being the reference. PostgreSQL tests
get the `postgres` marker and run where `postgres_server` finds a server (see tests/conftest.py)."""

REFERENCE = 'memory'


AT = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
"""Every helper message is stamped with this, so building the same message twice gives equal messages."""


def user(text: str, *, at: datetime = AT) -> m.ModelRequest:
    return m.ModelRequest(parts=[m.UserPromptPart(text, timestamp=at)], timestamp=at)


def reply(text: str, *, at: datetime = AT) -> m.ModelResponse:
    return m.ModelResponse(parts=[m.TextPart(text)], model_name='test', timestamp=at)


def tool_call(name: str, args: dict[str, object], call_id: str) -> m.ModelResponse:
    return m.ModelResponse(parts=[m.ToolCallPart(name, args, tool_call_id=call_id)], model_name='test', timestamp=AT)


def tool_return(name: str, content: object, call_id: str) -> m.ModelRequest:
    return m.ModelRequest(parts=[m.ToolReturnPart(name, content, tool_call_id=call_id, timestamp=AT)], timestamp=AT)


def summary(text: str) -> m.ModelRequest:
    return m.ModelRequest(parts=[m.CompactionPart(content=text)], timestamp=AT)


def turn(n: int, topic: str = 'weather') -> list[m.ModelMessage]:
    """A user prompt and a reply, with words that identify the turn."""
    return [user(f'question {n} about the {topic} please'), reply(f'answer {n} regarding {topic} follows')]


SYSTEM_PROMPT = 'You are the courier desk of Wombat Freight; answer in one sentence.'
PROMPT = 'Where is parcel Z-88 now?'
ANSWER = 'Parcel Z-88 left the Wombat depot at noon.'


def _answer(messages: list[m.ModelMessage], info: AgentInfo) -> m.ModelResponse:
    return m.ModelResponse(parts=[m.TextPart(ANSWER)])


async def run_briefed_agent(
    store: ConversationStore, conversation_id: str = 'briefed', scope: str | None = None
) -> list[m.ModelMessage]:
    """A real agent with a system prompt (sent in the request of the first user prompt), persisting
    through `store` in-process."""
    agent = Agent(
        FunctionModel(_answer, model_name='scripted'),
        system_prompt=SYSTEM_PROMPT,
        capabilities=[ConversationRecall(store=store, search_tool=False)],  # type: ignore[arg-type]
    )
    result = await agent.run(PROMPT, conversation_id=conversation_id, deps=RecallDeps(scope=scope))
    return result.all_messages()


BRIEFED_HITS: dict[tuple[str, str], list[tuple[int, str, str]]] = {
    ('courier desk', 'system'): [(0, 'system', SYSTEM_PROMPT)],
    ('courier desk', 'user'): [],
    ('where now', 'user'): [(0, 'user', PROMPT)],
    ('where now', 'system'): [],
}
"""What a search of `run_briefed_agent`'s conversation finds, by (query, role): (position, role, excerpt)
of each hit. The system prompt and the user prompt share message 0, and each is found only as its speaker's."""


def hex_hash(message: m.ModelMessage) -> str:
    return content_hash(message)


_PROBLEM_QUERIES = (
    'SELECT c.conversation_id, c.document_count, c.total_length, count(cd.doc_id), coalesce(sum(d.length), 0) '
    'FROM conversations c LEFT JOIN conversation_documents cd ON cd.conv_key = c.conv_key AND NOT cd.superseded '
    'LEFT JOIN documents d ON d.doc_id = cd.doc_id GROUP BY c.conv_key',
    'SELECT t.scope_key, '
    't.document_count + (SELECT coalesce(sum(g.document_count), 0) FROM index_segments g '
    'WHERE g.tenant_id = t.tenant_id), '
    't.total_length + (SELECT coalesce(sum(g.total_length), 0) FROM index_segments g '
    'WHERE g.tenant_id = t.tenant_id), '
    'count(d.doc_id), coalesce(sum(d.length), 0) '
    'FROM tenants t LEFT JOIN documents d ON d.tenant_id = t.tenant_id GROUP BY t.tenant_id',
    'SELECT d.doc_id, (SELECT count(*) FROM conversation_documents cd WHERE cd.doc_id = d.doc_id) FROM documents d',
    'SELECT count(*) FROM conversation_documents cd WHERE NOT EXISTS '
    '(SELECT 1 FROM documents d WHERE d.doc_id = cd.doc_id) '
    'OR NOT EXISTS (SELECT 1 FROM entries e WHERE e.entry_key = cd.entry_key)',
    'SELECT doc_id, tenant_id, length FROM documents',
    'SELECT tenant_id, term_id, first_doc, postings FROM posting_blocks '
    'UNION ALL SELECT tenant_id, term_id, first_doc, postings FROM pending_postings',
    'SELECT tenant_id, term_id, document_count FROM term_documents',
    'SELECT tenant_id, term_id, sum(length(postings)) / 12 FROM pending_postings GROUP BY tenant_id, term_id',
)
"""Plain SQL that SQLite and PostgreSQL both run, so one set of checks covers both backends."""


def _problems(results: Sequence[Sequence[Sequence[Any]]]) -> list[str]:
    """Every way the index disagrees with itself or the log, from the rows of `_PROBLEM_QUERIES`."""
    conversations, tenants, documents, dangling, lengths, blocks, frequencies, pending = results
    problems: list[str] = []
    for conversation_id, count, length, real_count, real_length in conversations:
        if (count, length) != (real_count, real_length):
            problems.append(f'{conversation_id}: counters {count}/{length}, membership {real_count}/{real_length}')
    for tenant, count, length, real_count, real_length in tenants:
        if (count, length) != (real_count, real_length):
            problems.append(f'tenant {tenant}: counters {count}/{length}, documents {real_count}/{real_length}')
    for doc_id, real in documents:
        if real == 0:
            problems.append(f'document {doc_id}: no memberships')
    if dangling[0][0]:
        problems.append(f'{dangling[0][0]} memberships without their document or entry')
    tenant_and_length = {doc_id: (tenant_id, length) for doc_id, tenant_id, length in lengths}
    per_term: Counter[tuple[int, int]] = Counter()
    for tenant_id, term_id, first_doc, stored in blocks:
        for doc_id, _, length in decode(first_doc, bytes(stored)):
            per_term[tenant_id, term_id] += 1
            if doc_id not in tenant_and_length or tenant_and_length[doc_id][0] != tenant_id:
                problems.append(f'posting of document {doc_id} without its document in tenant {tenant_id}')
            elif tenant_and_length[doc_id][1] != length:
                problems.append(f'posting of document {doc_id} with a stale length')
    counted: Counter[tuple[int, int]] = Counter()
    for tenant_id, term_id, count in (*frequencies, *pending):  # Folded, plus what segments hold.
        counted[tenant_id, term_id] += count
    if +counted != +per_term:
        problems.append('term document frequencies that disagree with the postings')
    return problems


def index_problems(path: Path) -> list[str]:
    """Every way the index disagrees with itself or the log (an empty list when consistent)."""
    with closing(sqlite3.connect(path)) as db:
        return _problems([db.execute(query).fetchall() for query in _PROBLEM_QUERIES])


_TABLES = (
    'conversations',
    'entries',
    'documents',
    'posting_blocks',
    'pending_postings',
    'conversation_documents',
    'terms',
    'applied_writes',
)


def table_counts(path: Path) -> dict[str, int]:
    with closing(sqlite3.connect(path)) as db:
        return {table: db.execute(f'SELECT count(*) FROM {table}').fetchone()[0] for table in _TABLES}


async def _pg_rows(store: PostgresConversationStore, sql: str) -> list[tuple[Any, ...]]:
    async with store._db.connection() as connection:
        return [tuple(row) for row in await connection.fetch(sql)]


async def problems_of(store: AnyStore) -> list[str]:
    """`index_problems` for a store of either backend."""
    if isinstance(store, SqliteConversationStore):
        return index_problems(store.path)
    return _problems([await _pg_rows(store, query) for query in _PROBLEM_QUERIES])


async def row_counts(store: AnyStore) -> dict[str, int]:
    """`table_counts` for a store of either backend."""
    if isinstance(store, SqliteConversationStore):
        return table_counts(store.path)
    return {table: (await _pg_rows(store, f'SELECT count(*) FROM {table}'))[0][0] for table in _TABLES}


async def column_of(store: AnyStore, sql: str) -> list[Any]:
    """The first column of a query's rows, on either backend (for terms, doc ids and the like)."""
    return [row[0] for row in await rows_of(store, sql)]


async def append_after(
    store: AnyStore, conversation_id: str, scope: str | None, history: list[m.ModelMessage], new: list[m.ModelMessage]
) -> list[m.ModelMessage]:
    """Append `new` after `history` without a run id (as messages saved outside an agent run are)."""
    await store.append(
        AppendRequest(
            conversation_id=conversation_id,
            scope=scope,
            idempotency_key=f'{conversation_id}/{len(history)}/{content_hash(new[0])}',
            base_length=len(history),
            base_hash=content_hash(history[-1]) if history else None,
            messages=new,
        )
    )
    return [*history, *new]


def _released_postings_ddl(store: AnyStore) -> list[str]:
    """The `postings` table and its impact index as migrations 1 and 2 created them, in the store's spelling."""
    from temporal_recall.store.postgres import _dialect as _postgres_dialect
    from temporal_recall.store.sqlite import _dialect as _sqlite_dialect

    released = (_sqlite_dialect if isinstance(store, SqliteConversationStore) else _postgres_dialect).MIGRATIONS
    return [s for s in released[0].statements if 'CREATE TABLE postings' in s] + list(released[1].statements)


async def reopened_logging(site: Site, caplog: pytest.LogCaptureFixture) -> tuple[AnyStore, list[str]]:
    """Open the store at `site` again (an upgrade), with the reindexing progress its opening logged."""
    with caplog.at_level(logging.INFO, logger='temporal_recall.store'):
        store = await site.open()
    return store, [record.getMessage() for record in caplog.records if 'reindexing' in record.getMessage()]


async def answered_twice(
    store: AnyStore, conversation_id: str, scope: str | None, question: str, first: str, second: str
) -> None:
    """`question` answered `first` by a model-request activity whose retry answered `second` (a Temporal
    activity retry after the first attempt's write): the first answer is superseded inside the run.

    Written as the capability's in-activity writes are: the request before the model call (one key for
    every attempt), the response after it (a key per attempt), each fenced by the activity's attempt."""
    asked = user(question)
    unit = f'wf-{conversation_id}/run-1/activity-1'
    for attempt, answer in ((1, first), (2, second)):
        fence = Fence(key=unit, attempt=attempt)
        for key, base, messages in (
            (f'{unit}/prefix', [], [asked]),
            (f'{unit}/{attempt}/response', [asked], [reply(answer)]),
        ):
            await store.append(
                AppendRequest(
                    conversation_id=conversation_id,
                    scope=scope,
                    idempotency_key=key,
                    base_length=len(base),
                    base_hash=content_hash(base[-1]) if base else None,
                    messages=messages,
                    run_id='run-1',
                    fence=fence,
                )
            )


async def answered_again(
    store: AnyStore, conversation_id: str, scope: str | None, question: str, first: str, second: str
) -> None:
    """`question` answered `first`, then answered again from the same point `second` by a later write that is
    no retry (a regenerated answer, a rewritten turn): the first answer is left on a branch, still said."""
    asked = user(question)
    await append_after(store, conversation_id, scope, [], [asked, reply(first)])
    await append_after(store, conversation_id, scope, [asked], [reply(second)])


UNDO_VERSION_11 = (
    'DROP TABLE index_segments',
    'DELETE FROM pending_postings',
    'ALTER TABLE tenants ADD COLUMN pending_segments INTEGER NOT NULL DEFAULT 0',
    'ALTER TABLE tenants ADD COLUMN pending_postings BIGINT NOT NULL DEFAULT 0',
    'ALTER TABLE documents ADD COLUMN refs INTEGER NOT NULL DEFAULT 0',
    'UPDATE documents SET refs = (SELECT count(*) FROM conversation_documents cd WHERE cd.doc_id = documents.doc_id)',
)
"""What migration 11 changed, put back as version 9 had it (its segments go: merge them first to keep them)."""

UNDO_VERSION_8 = (
    'DROP TABLE pending_postings',
    'ALTER TABLE tenants DROP COLUMN pending_segments',
    'ALTER TABLE tenants DROP COLUMN pending_postings',
)
"""What migration 8 added, taken away (its pending postings go with it)."""

UNDO_VERSION_14 = ('DROP TABLE document_vectors', 'DROP TABLE vector_space')
"""What migration 14 added (the vectors of recall by meaning), taken away."""

UNDO_VERSION_15 = ('ALTER TABLE conversations DROP COLUMN title', 'ALTER TABLE conversations DROP COLUMN metadata')
"""What migration 15 added (conversation titles and metadata), taken away."""

UNDO_SEGMENTS = (*UNDO_VERSION_11, *UNDO_VERSION_8)
"""What migrations 8 and 11 added, taken away (their pending postings go with them)."""


async def settle_merges(store: AnyStore) -> None:
    """Wait for the merges the store's writes started in the background (`postings._merger`)."""
    await store._merger.settle()  # pyright: ignore[reportPrivateUsage]


async def merge_everything(store: AnyStore) -> None:
    """Merge every tenant's pending postings into its blocks (`_segments.merge_pending`)."""
    from temporal_recall.store.postings._segments import merge_pending

    for (tenant_id,) in await rows_of(store, 'SELECT tenant_id FROM tenants'):
        await store._backend.run_write(lambda s, t=tenant_id: merge_pending(s, t))  # pyright: ignore[reportPrivateUsage]


UNDO_BRANCH_MARKS = (
    'DROP INDEX conversation_documents_branch_only',
    'ALTER TABLE conversation_documents DROP COLUMN branch_only',
    # Version 9 counted every member of a conversation, its branches' too.
    'UPDATE conversations SET document_count = (SELECT count(*) FROM conversation_documents m '
    'WHERE m.conv_key = conversations.conv_key), total_length = (SELECT coalesce(sum(d.length), 0) '
    'FROM conversation_documents m JOIN documents d ON d.doc_id = m.doc_id WHERE m.conv_key = conversations.conv_key)',
)
"""What migration 10 changed, taken away: the members' marks and the counters over the current history."""


UNDO_VERSION_13 = ('DROP INDEX message_bodies_by_hash',)
"""What migration 13 added, taken away."""


UNDO_VERSION_16_POSTGRES = ('DROP FUNCTION temporal_recall_append', 'DROP FUNCTION temporal_recall_append_state')
"""What migration 16 added on PostgreSQL (nothing on SQLite), taken away."""


UNDO_VERSION_17 = ('DROP TABLE vector_counts',)
"""What migration 17 added (the vector counts per tenant), taken away."""


UNDO_VERSION_18 = ('DROP TABLE posting_tiers', 'DROP TABLE term_tiers')
"""What migration 18 added (the top tiers of long posting lists), taken away."""


UNDO_VERSION_19 = ('DROP TABLE posting_deep_tiers', 'DROP TABLE term_deep_tiers')
"""What migration 19 added (the deeper tiers of very long posting lists), taken away."""


UNDO_VERSION_20 = ('ALTER TABLE term_tiers DROP COLUMN version', 'ALTER TABLE term_deep_tiers DROP COLUMN version')
"""What migration 20 added (the tiers' versions), taken away."""


TIER_WORDS = ['order', 'refund', 'late', 'box'] + [f'w{n}' for n in range(40)]
"""Four common words (long lists: tiered with the tests' small tier sizes) among forty rarer ones."""


async def fill_tiered(store: AnyStore, conversations: range) -> None:
    """One message of 3 to 30 of `TIER_WORDS` per conversation (seeded by the range), every write merged:
    the tiers of the common words follow the blocks."""
    rng = random.Random(conversations.start)
    for number in conversations:
        await append_new(store, number, [user(' '.join(rng.choices(TIER_WORDS, k=rng.randint(3, 30))))])
    await settle_merges(store)
    await merge_everything(store)


async def append_new(
    store: DeltaWriter, number: int, messages: Sequence[m.ModelMessage], *, scope: str = 'tenant'
) -> None:
    """`messages` as the whole of a new conversation `c<number>` of `scope` (conversation ids are the store's,
    whatever the scope: give each scope its own numbers)."""
    await store.append(
        AppendRequest(
            conversation_id=f'c{number}',
            scope=scope,
            idempotency_key=f'k{number}',
            base_length=0,
            base_hash=None,
            messages=list(messages),
        )
    )


async def back_to_version_19(store: AnyStore) -> None:
    """Turn a store into what version 19 wrote: tiers without versions, version 19 recorded. Close and reopen it."""
    for statement in (*UNDO_VERSION_20, 'DELETE FROM schema_migrations WHERE version > 19'):
        await run_sql(store, statement)


async def back_to_version_18(store: AnyStore) -> None:
    """Turn a store into what version 18 wrote: no deeper tiers, version 18 recorded. Close and reopen it."""
    await back_to_version_19(store)
    for statement in (*UNDO_VERSION_19, 'DELETE FROM schema_migrations WHERE version > 18'):
        await run_sql(store, statement)


async def back_to_version_17(store: AnyStore) -> None:
    """Turn a store into what version 17 wrote: no tiers, version 17 recorded. Close and reopen it."""
    await back_to_version_18(store)
    for statement in (*UNDO_VERSION_18, 'DELETE FROM schema_migrations WHERE version > 17'):
        await run_sql(store, statement)


async def back_to_version_16(store: AnyStore) -> None:
    """Turn a store into what version 16 wrote: no vector counts, version 16 recorded. Close and reopen it."""
    await back_to_version_17(store)
    for statement in (*UNDO_VERSION_17, 'DELETE FROM schema_migrations WHERE version > 16'):
        await run_sql(store, statement)


async def back_to_version_15(store: AnyStore) -> None:
    """Turn a store into what version 15 wrote: no append function (PostgreSQL), version 15 recorded. Close
    and reopen it afterwards."""
    await back_to_version_16(store)
    if not isinstance(store, SqliteConversationStore):
        for statement in UNDO_VERSION_16_POSTGRES:
            await run_sql(store, statement)
    await run_sql(store, 'DELETE FROM schema_migrations WHERE version > 15')


async def back_to_version_14(store: AnyStore) -> None:
    """Turn a store into what version 14 wrote: no titles or metadata, version 14 recorded. Close and reopen it."""
    await back_to_version_15(store)
    for statement in (*UNDO_VERSION_15, 'DELETE FROM schema_migrations WHERE version > 14'):
        await run_sql(store, statement)


async def back_to_version_13(store: AnyStore) -> None:
    """Turn a store into what version 13 wrote: no vectors, version 13 recorded. Close and reopen it afterwards."""
    await back_to_version_14(store)
    for statement in (*UNDO_VERSION_14, 'DELETE FROM schema_migrations WHERE version > 13'):
        await run_sql(store, statement)


async def back_to_version_12(store: AnyStore) -> None:
    """Turn a store into what version 12 wrote: no index of bodies by hash, version 12 recorded."""
    await back_to_version_13(store)
    for statement in (*UNDO_VERSION_13, 'DELETE FROM schema_migrations WHERE version > 12'):
        await run_sql(store, statement)


UNDO_SUPERSEDED = (
    'DROP TABLE superseded_entries',
    'DROP INDEX conversation_documents_superseded',
    'ALTER TABLE conversation_documents RENAME COLUMN superseded TO branch_only',
    'CREATE INDEX conversation_documents_branch_only ON conversation_documents (conv_key) WHERE branch_only',
)
"""What migration 12 changed, put back as version 11 had it (the marks then recomputed by `HEAD_ONLY_MARKS`)."""

HEAD_ONLY_MARKS = (
    """
    WITH RECURSIVE head(conv_key, k) AS (
        SELECT conv_key, head_key FROM conversations WHERE head_key IS NOT NULL
        UNION SELECT head.conv_key, e.parent_key FROM head JOIN entries e ON e.entry_key = head.k
        WHERE e.parent_key IS NOT NULL
    )
    UPDATE conversation_documents SET branch_only = NOT EXISTS (
        SELECT 1 FROM head JOIN entries e ON e.entry_key = head.k JOIN documents d ON d.content_hash = e.content_hash
        WHERE head.conv_key = conversation_documents.conv_key AND d.doc_id = conversation_documents.doc_id
        AND NOT e.unindexed
    )
    """,
    'UPDATE conversations SET document_count = (SELECT count(*) FROM conversation_documents m '
    'WHERE m.conv_key = conversations.conv_key AND NOT m.branch_only), '
    'total_length = (SELECT coalesce(sum(d.length), 0) FROM conversation_documents m '
    'JOIN documents d ON d.doc_id = m.doc_id '
    'WHERE m.conv_key = conversations.conv_key AND NOT m.branch_only)',
)
"""Versions 10 and 11's rule, written independently here: a member is marked when no indexed entry the
conversation's head reaches holds it, and the counters leave marked members out."""


async def back_to_version_11(store: AnyStore) -> None:
    """Turn a store into what version 11 wrote: members marked by whether the head reaches them (a default
    search saw only the current history), no record of supersessions, version 11 recorded. Close and reopen
    it afterwards."""
    await back_to_version_12(store)
    for statement in (*UNDO_SUPERSEDED, *HEAD_ONLY_MARKS, 'DELETE FROM schema_migrations WHERE version > 11'):
        await run_sql(store, statement)


async def back_to_version_10(store: AnyStore) -> None:
    """Turn a store into what version 10 wrote: segments merged, documents with `refs`, pending counters
    on tenants, version 10 recorded. Close and reopen it afterwards."""
    await merge_everything(store)  # This release's merge, while the tables it keeps (the tiers) are there.
    await back_to_version_11(store)
    for statement in (*UNDO_VERSION_11, 'DELETE FROM schema_migrations WHERE version > 10'):
        await run_sql(store, statement)


async def back_to_version_9(store: AnyStore) -> None:
    """Turn a store into what version 9 wrote: no mark on members only a branch holds, conversation counters
    over every member, version 9 recorded. Close and reopen it afterwards."""
    await back_to_version_10(store)
    for statement in (*UNDO_BRANCH_MARKS, 'DELETE FROM schema_migrations WHERE version > 9'):
        await run_sql(store, statement)


async def back_to_version_7(store: AnyStore) -> None:
    """Turn a store into what version 7 wrote: every posting in `posting_blocks` (the pending ones merged
    there), no `pending_postings` nor pending counters, version 7 recorded. Close and reopen it afterwards."""
    await back_to_version_9(store)
    for statement in (*UNDO_VERSION_8, 'DELETE FROM schema_migrations WHERE version > 7'):
        await run_sql(store, statement)


async def back_to_version_6(store: AnyStore) -> None:
    """Turn a store into what version 6 wrote: every posting a row of `postings` (with `postings_by_impact`),
    no `posting_blocks`, version 6 recorded. The store must be closed and reopened afterwards."""
    await back_to_version_7(store)
    blocks = await rows_of(store, 'SELECT tenant_id, term_id, first_doc, postings FROM posting_blocks')
    postings = [
        (tenant_id, term_id, *posting)
        for tenant_id, term_id, first_doc, stored in blocks
        for posting in decode(first_doc, bytes(stored))
    ]
    statements = ['DROP TABLE posting_blocks', *_released_postings_ddl(store)]
    statements.append('DELETE FROM schema_migrations WHERE version > 6')
    insert = 'INSERT INTO postings (tenant_id, term_id, doc_id, term_frequency, length) VALUES ($1, $2, $3, $4, $5)'
    if isinstance(store, SqliteConversationStore):
        with closing(sqlite3.connect(store.path)) as db:
            for statement in statements:
                db.execute(statement)
            db.executemany(insert.replace('$', '?'), postings)
            db.commit()
        return
    async with store._db.connection() as connection, connection.transaction():  # pyright: ignore[reportPrivateUsage]
        for statement in statements:
            await connection.execute(statement)
        await connection.executemany(insert, postings)


async def back_to_version_8(store: AnyStore) -> None:
    """Turn a store into what version 8 wrote, given one whose documents are whole messages (each
    content's one document, as version 8's writer made them): `documents` unique by tenant and content,
    version 8 recorded. Close and reopen it afterwards."""
    from temporal_recall.store.postgres import _dialect as _postgres_dialect
    from temporal_recall.store.sqlite import _dialect as _sqlite_dialect

    await back_to_version_9(store)
    released = (_sqlite_dialect if isinstance(store, SqliteConversationStore) else _postgres_dialect).MIGRATIONS
    columns = 'doc_id, tenant_id, content_hash, length, refs, term_ids, role'
    documents = await rows_of(store, f'SELECT {columns} FROM documents')
    assert len({(row[1], bytes(row[2])) for row in documents}) == len(documents), 'not a version 8 index'
    await run_sql(store, 'DROP TABLE documents')
    for statement in (*released[0].statements, *released[4].statements):
        if 'CREATE TABLE documents' in statement or 'ALTER TABLE documents' in statement:
            await run_sql(store, statement)
    for row in documents:
        await run_sql(store, f'INSERT INTO documents ({columns}) VALUES ($1, $2, $3, $4, $5, $6, $7)', *row)
    await run_sql(store, 'DELETE FROM schema_migrations WHERE version > 8')


async def run_sql(store: AnyStore, sql: str, *params: Any) -> None:
    """Run one statement (`$n` placeholders) on either backend, committed: to damage or age a store."""
    if isinstance(store, SqliteConversationStore):
        with closing(sqlite3.connect(store.path)) as db:
            db.execute(sql.replace('$', '?'), params)
            db.commit()
        return
    async with store._db.connection() as connection:  # pyright: ignore[reportPrivateUsage]
        await connection.execute(sql, *params)


async def rows_of(store: AnyStore, sql: str) -> list[tuple[Any, ...]]:
    if isinstance(store, SqliteConversationStore):
        with closing(sqlite3.connect(store.path)) as db:
            return db.execute(sql).fetchall()
    return await _pg_rows(store, sql)


async def postings_of(store: IndexReader, target: SearchTarget, terms: Sequence[str]) -> dict[str, list[Posting]]:
    """Each term's postings among the target's documents as `Posting` tuples, what the pure `rank` takes
    (`{}` for a target the store does not know)."""
    found = await store.target_postings(target, terms)
    return {} if found is None else {term: _tuples(columns) for term, columns in found.columns.items()}


def _tuples(columns: PostingColumns) -> list[Posting]:
    return [Posting(*posting) for posting in zip(*(column.tolist() for column in columns), strict=True)]


def _rank_tuples(
    stats: IndexStats,
    columns: dict[str, PostingColumns],
    frequencies: dict[str, int],
    terms: Sequence[str],
    parameters: BM25Parameters,
    limit: int,
) -> list[ScoredDocument]:
    postings = {term: _tuples(found) for term, found in columns.items()}
    return rank(stats, postings, terms, parameters=parameters, limit=limit, document_frequencies=frequencies)


@contextmanager
def ranking_by_rank() -> Iterator[None]:
    """Searches inside rank with the pure `rank` over posting tuples in place of the array scoring, reading
    every posting (never the top tiers of `search._pruned`): the reference the array scoring and the
    pruned ranking must match bit for bit."""
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(plan, 'rank_columns', _rank_tuples)
        patched.setattr(plan, '_spans_tenant', lambda target: False)
        yield


async def reference_search(reader: IndexReader, request: SearchRequest) -> SearchResult:
    """`search_index` ranked by `ranking_by_rank`."""
    with ranking_by_rank():
        return await search_index(reader, request)
