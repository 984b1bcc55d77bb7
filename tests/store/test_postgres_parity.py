"""Ranking parity: the same corpus written to SQLite and PostgreSQL gives identical `search_index` results.

Ranking is pure code over what `IndexReader` returns, so parity comes down to both backends storing
the same documents, postings and membership and numbering documents in the same first-indexed order
(the tie-break). The generated corpus is built to make that order matter: a small Zipf vocabulary
(many exact score ties), repeated messages (shared documents), several scopes, runs, forks within
and across scopes, a branch, a delete, and appends on top.

The corpus goes in through `write_record` with the same entries (so the same entry ids) on both
backends, then through `append` (whose entry ids each store mints): hits on appended entries are
compared by conversation and position instead of id; everything else must be equal exactly,
scores included.
"""

from __future__ import annotations

import random
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import messages as m
from pydantic_ai.conversation_store import ConversationEntry, ConversationRecord
from pydantic_ai.usage import RunUsage

from temporal_recall.content import content_hash
from temporal_recall.errors import RecallError
from temporal_recall.models import SearchRequest
from temporal_recall.search import SearchResult
from temporal_recall.search.plan import search_index
from temporal_recall.store import AppendRequest, IndexReader, PostgresConversationStore, SqliteConversationStore

from ._support import AT, AnyStore, PostgresSite, postgres_url, postings_of, problems_of, ranking_by_rank

pytestmark = pytest.mark.postgres

WORDS = [f'w{index}' for index in range(40)] + ['Paris', 'invoice', 'INV-7731', 'src/app/main.py', 'order A-17']
SCOPES = [None, 'team', 'other', 'solo']
_MINTED = re.compile(r'[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}')
"""A uuid7, as stores mint for appended entries (written entries here have readable ids)."""


class Corpus:
    """A seeded generator of messages, writes and queries; the same seed gives the same everything."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.said: list[str] = []
        self.weights = [1 / (rank + 1) ** 1.1 for rank in range(len(WORDS))]

    def text(self) -> str:
        if self.said and self.rng.random() < 0.15:
            return self.rng.choice(self.said)  # an exact repeat: the same document again
        text = ' '.join(self.rng.choices(WORDS, weights=self.weights, k=self.rng.randint(1, 9)))
        self.said.append(text)
        return text

    def message(self, run_id: str) -> m.ModelMessage:
        kind = self.rng.random()
        if kind < 0.4:
            return m.ModelRequest(parts=[m.UserPromptPart(self.text(), timestamp=AT)], timestamp=AT, run_id=run_id)
        if kind < 0.55:
            call = f'call-{self.rng.randrange(10**6)}'
            return m.ModelResponse(
                parts=[m.ToolCallPart('lookup', {'q': self.text()}, tool_call_id=call)], timestamp=AT, run_id=run_id
            )
        if kind < 0.7:
            return m.ModelRequest(
                parts=[m.ToolReturnPart('lookup', self.text(), tool_call_id='c', timestamp=AT)],
                timestamp=AT,
                run_id=run_id,
            )
        if kind < 0.75:
            return m.ModelRequest(parts=[m.CompactionPart(content=self.text())], timestamp=AT, run_id=run_id)
        return m.ModelResponse(parts=[m.TextPart(self.text())], model_name='test', timestamp=AT, run_id=run_id)

    def messages(self, count: int, run_id: str) -> list[m.ModelMessage]:
        return [self.message(run_id) for _ in range(count)]

    def query(self) -> str:
        words = self.rng.choices(WORDS, weights=self.weights, k=self.rng.randint(1, 3))
        if self.rng.random() < 0.1:
            words.append('absentword')
        return ' '.join(words)


def chain(messages: list[m.ModelMessage], parent_id: str | None, prefix: str) -> list[ConversationEntry]:
    entries: list[ConversationEntry] = []
    for index, message in enumerate(messages):
        entries.append(ConversationEntry(id=f'{prefix}-{index}', parent_id=parent_id, message=message))
        parent_id = entries[-1].id
    return entries


async def write_corpus(stores: list[AnyStore], seed: int) -> list[tuple[str, str | None, list[str]]]:
    """Write the corpus to every store; returns `(conversation id, scope, run ids)` of the survivors."""
    corpus = Corpus(seed)
    conversations: dict[str, tuple[str | None, list[ConversationEntry], list[str]]] = {}
    revisions: dict[str, str] = {}

    async def write(record: ConversationRecord, entries: list[ConversationEntry], expected: str | None) -> None:
        for store in stores:
            await store.write_record(record, new_entries=entries, expected_revision=expected)
        revisions[record.conversation_id] = record.revision

    for number in range(25):
        # c24 is alone in its scope: PostgreSQL then scans posting lists rather than probing per member.
        cid, scope = f'c{number}', SCOPES[number % 3] if number < 24 else 'solo'
        runs = [f'{cid}-run{run}' for run in range(corpus.rng.randint(1, 3))]
        entries: list[ConversationEntry] = []
        for run in runs:
            entries += chain(corpus.messages(corpus.rng.randint(3, 9), run), entries[-1].id if entries else None, run)
        record = ConversationRecord(
            conversation_id=cid, head_id=entries[-1].id, scope=scope, usage=RunUsage(requests=len(runs))
        )
        await write(record, entries, None)
        conversations[cid] = (scope, entries, runs)
    # Forks: into the same scope, and into another (which gets its own documents).
    for source, target, scope in [('c1', 'f1', 'team'), ('c4', 'f4', 'other'), ('c5', 'f5', None)]:
        _, entries, runs = conversations[source]
        at = entries[len(entries) // 2]
        await write(
            ConversationRecord(conversation_id=target, head_id=at.id, scope=scope, forked_from=source), [], None
        )
        conversations[target] = (scope, entries[: len(entries) // 2 + 1], runs)
    # A branch: new messages after an earlier entry, the old head kept in `branches`.
    scope, entries, runs = conversations['c7']
    branch = chain(corpus.messages(4, 'c7-branch'), entries[1].id, 'c7-branch')
    branched = ConversationRecord(
        conversation_id='c7', head_id=branch[-1].id, scope=scope, branches=[entries[-1].id], revision='c7-r2'
    )
    await write(branched, branch, revisions['c7'])
    conversations['c7'] = (scope, [*entries, *branch], [*runs, 'c7-branch'])
    # A delete: its documents go unless another conversation of its scope holds them.
    for store in stores:
        await store.delete_record('c10', expected_revision=revisions['c10'])
    del conversations['c10']
    # Appends on top (entry ids minted by each store).
    for cid in ('c2', 'c3', 'f1'):
        scope, entries, runs = conversations[cid]
        history = await stores[0].read_history(entries[-1].id)
        new = corpus.messages(5, f'{cid}-appended')
        for store in stores:
            await store.append(
                AppendRequest(
                    conversation_id=cid,
                    scope=scope,
                    idempotency_key=f'{cid}-append',
                    base_length=len(history),
                    base_hash=content_hash(history[-1].message),
                    messages=new,
                    run_id=f'{cid}-appended',
                )
            )
        conversations[cid] = (scope, entries, [*runs, f'{cid}-appended'])
    return [(cid, scope, runs) for cid, (scope, _, runs) in conversations.items()]


def requests(corpus: Corpus, conversations: list[tuple[str, str | None, list[str]]]) -> list[SearchRequest]:
    found: list[SearchRequest] = []
    for _ in range(150):
        options: dict[str, Any] = {
            'query': corpus.query(),
            'limit': corpus.rng.choice([1, 3, 10, 50]),
            'context_lines': corpus.rng.choice([0, 0, 2]),
        }
        if corpus.rng.random() < 0.2:
            options |= {'k1': corpus.rng.choice([0.0, 0.9, 3.0]), 'b': corpus.rng.choice([0.0, 0.3, 1.0])}
        cid, scope, runs = corpus.rng.choice(conversations)
        if corpus.rng.random() < 0.4:
            options |= {'scope': corpus.rng.choice(SCOPES), 'all_conversations': True}
        else:
            wrong = corpus.rng.random() < 0.1
            options |= {'scope': 'nobody' if wrong else scope, 'conversation_id': cid}
        if corpus.rng.random() < 0.2:
            options['run_id'] = corpus.rng.choice(runs)
        elif corpus.rng.random() < 0.2:
            options['exclude_run_id'] = corpus.rng.choice(runs)
        found.append(SearchRequest(**options))
    return found


async def entry_labels(store: AnyStore, conversations: list[tuple[str, str | None, list[str]]]) -> dict[str, str]:
    """Entry id -> a backend-independent label: the id itself for written entries, conversation@position
    for appended ones (whose ids each store minted)."""
    labels: dict[str, str] = {}
    for cid, scope, _ in conversations:
        for position, entry in enumerate(await store.load_entries(cid, scope=scope) or []):
            labels[entry.id] = f'{cid}@{position}' if _MINTED.fullmatch(entry.id) else entry.id
    return labels


async def answer(store: IndexReader, request: SearchRequest, labels: dict[str, str]) -> SearchResult | str:
    try:
        result = await search_index(store, request)
    except RecallError as error:
        return f'{type(error).__name__}: {error}'
    hits = [hit.model_copy(update={'entry_id': labels.get(hit.entry_id, hit.entry_id)}) for hit in result.hits]
    return result.model_copy(update={'hits': hits})


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[tuple[SqliteConversationStore, PostgresConversationStore]]:
    site = PostgresSite(postgres_url())
    sqlite = await SqliteConversationStore.open(tmp_path / 'parity.db')
    try:
        postgres = await site.open()
        try:
            yield sqlite, postgres
        finally:
            await postgres.close()
    finally:
        await sqlite.close()
        await site.close()


@pytest.mark.parametrize('seed', [1, 2])
async def test_search_history_is_identical_on_sqlite_and_postgres(
    pair: tuple[SqliteConversationStore, PostgresConversationStore], seed: int
) -> None:
    sqlite, postgres = pair
    conversations = await write_corpus([sqlite, postgres], seed)
    assert await problems_of(postgres) == []
    labels = {store: await entry_labels(store, conversations) for store in (sqlite, postgres)}
    compared = hits = 0
    for request in requests(Corpus(seed + 100), conversations):
        expected = await answer(sqlite, request, labels[sqlite])
        actual = await answer(postgres, request, labels[postgres])
        assert actual == expected, request
        compared += 1
        hits += len(expected.hits) if isinstance(expected, SearchResult) else 0
    assert compared == 150 and hits > 300  # the queries really found things

    # A rebuilt index answers the same too (the doc-id order survives `reindex` on both backends).
    assert await sqlite.reindex() == await postgres.reindex()
    for request in requests(Corpus(seed + 200), conversations)[:40]:
        assert await answer(postgres, request, labels[postgres]) == await answer(sqlite, request, labels[sqlite])


async def test_array_scored_scope_wide_search_is_identical(
    pair: tuple[SqliteConversationStore, PostgresConversationStore],
) -> None:
    """Scope-wide searches scored as arrays agree between the backends, and with `rank` over every
    posting list read as tuples (`ranking_by_rank`)."""
    sqlite, postgres = pair
    conversations = await write_corpus([sqlite, postgres], 4)
    labels = {store: await entry_labels(store, conversations) for store in (sqlite, postgres)}
    corpus = Corpus(404)
    scoped = [
        SearchRequest(query=corpus.query(), scope=corpus.rng.choice(SCOPES), all_conversations=True, limit=limit)
        for limit in (1, 3, 10)
        for _ in range(20)
    ]
    with ranking_by_rank():
        full = [await answer(sqlite, request, labels[sqlite]) for request in scoped]
    for request, expected in zip(scoped, full, strict=True):
        assert await answer(postgres, request, labels[postgres]) == expected, request
        assert await answer(sqlite, request, labels[sqlite]) == expected, request


async def test_posting_lists_are_identical(pair: tuple[SqliteConversationStore, PostgresConversationStore]) -> None:
    """Below the ranking: the reader's raw answers, doc ids included, for every scope and word."""
    from temporal_recall.store import SearchTarget

    sqlite, postgres = pair
    conversations = await write_corpus([sqlite, postgres], 3)
    words = [word.lower() for word in WORDS if word.isalnum()]
    for scope in SCOPES:
        targets = [SearchTarget(scope=scope, conversation_id=None)] + [
            SearchTarget(scope=scope, conversation_id=cid) for cid, each, _ in conversations if each == scope
        ]
        for target in targets:
            assert await postgres.index_stats(target) == await sqlite.index_stats(target)
            assert await postings_of(postgres, target, words) == await postings_of(sqlite, target, words)
            assert await postgres.document_frequencies(target, words) == await sqlite.document_frequencies(
                target, words
            )
            read = await postgres.target_postings(target, words)
            expected = await sqlite.target_postings(target, words)
            assert read is not None and expected is not None
            assert read.stats == expected.stats == await sqlite.index_stats(target)
            assert read.columns.keys() == expected.columns.keys()
            for word, found in read.columns.items():
                assert [list(map(int, column)) for column in found] == [
                    list(map(int, c)) for c in expected.columns[word]
                ]
