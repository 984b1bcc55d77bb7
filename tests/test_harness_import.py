"""`import_harness` against a real pydantic-ai-harness database (built by tests/data/make_harness_db.py).

`harness_expected.json` lists the distinct messages the harness's own `SnapshotHistorySource`
recovered from `harness_steps.db` (written with pydantic-ai 2.62); they are loaded here with our
pydantic-ai and compared by our canonical content hash, so the two versions' JSON differences and
the stamps pydantic-ai adds after a snapshot do not matter.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from temporal_recall.content import content_hash, load_message
from temporal_recall.harness_import import HarnessImportError, import_harness, read_harness_runs
from temporal_recall.models import SearchRequest
from temporal_recall.search import searchable_text
from temporal_recall.search.plan import search_index
from temporal_recall.store import SqliteConversationStore, open_store

DATA = Path(__file__).parent / 'data'
HARNESS_DB = DATA / 'harness_steps.db'
EXPECTED: dict[str, Any] = json.loads((DATA / 'harness_expected.json').read_text(encoding='utf-8'))


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteConversationStore]:
    opened = await open_store(tmp_path / 'recall.db')
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def harness_copy(tmp_path: Path) -> Path:
    """A writable copy, for tests that change the harness file."""
    copy = tmp_path / 'harness.db'
    shutil.copyfile(HARNESS_DB, copy)
    return copy


def expected_hashes() -> set[str]:
    return {content_hash(load_message(json.dumps(message))) for message in EXPECTED['distinct_messages']}


async def stored_hashes(store: SqliteConversationStore) -> set[str]:
    """The content hash of every message any conversation reaches, through its head or a branch."""
    hashes: set[str] = set()
    for record in await store.list_conversations():
        for tip in [record.head_id, *record.branches]:
            hashes.update(content_hash(entry.message) for entry in await store.read_history(tip))
    return hashes


def test_expected_file_cross_checks_our_canonical_hash() -> None:
    # The generator deduplicated with a stdlib canonicalisation; ours must agree on what is distinct.
    assert len(expected_hashes()) == len(EXPECTED['distinct_messages']) > 20


def test_the_shipped_database_is_small() -> None:
    assert HARNESS_DB.stat().st_size < 1_000_000


async def test_recovered_run_histories_match_the_harness() -> None:
    _fingerprint, runs = await read_harness_runs(HARNESS_DB)
    assert [(run.run_id, len(run.messages)) for run in runs] == [
        (run['run_id'], run['messages']) for run in EXPECTED['runs']
    ]
    assert {run.conversation_id for run in runs} == {run['conversation_id'] for run in EXPECTED['runs']}


async def test_import_stores_exactly_the_distinct_messages_the_harness_recovers(
    store: SqliteConversationStore,
) -> None:
    summary = await import_harness(store, HARNESS_DB)

    assert await stored_hashes(store) == expected_hashes()
    stats = await store.stats()
    assert stats.documents == len(expected_hashes())
    assert summary.runs == len(EXPECTED['runs'])
    assert summary.empty_runs == 1  # the run whose tool failed left only an interrupted snapshot
    assert summary.stored == stats.entries
    assert summary.duplicates == summary.snapshot_messages - summary.stored > 0
    assert sorted(summary.conversations) == sorted({r['conversation_id'] for r in EXPECTED['runs'] if r['messages']})
    assert not summary.conflicts


async def test_importing_twice_changes_nothing(store: SqliteConversationStore) -> None:
    first = await import_harness(store, HARNESS_DB)
    stats = await store.stats()
    records = {r.conversation_id: (r.head_id, r.branches, r.revision) for r in await store.list_conversations()}

    second = await import_harness(store, HARNESS_DB)

    assert await store.stats() == stats
    assert {r.conversation_id: (r.head_id, r.branches, r.revision) for r in await store.list_conversations()} == records
    assert second.stored == 0
    assert second.duplicates == second.snapshot_messages == first.snapshot_messages
    assert 'all duplicates' in second.describe()


async def test_continued_runs_extend_one_conversation(store: SqliteConversationStore) -> None:
    await import_harness(store, HARNESS_DB)

    conversation = await store.load('support-1')
    assert conversation is not None
    texts = [searchable_text(message) for message in conversation.messages]
    assert len(texts) == 10  # three runs, each continuing the last: 4 + 4 + 2 messages, each once
    assert 'Where is my order A-1042?' in texts[0]
    assert 'Thanks, that is all.' in texts[8]
    record = await store.read_record('support-1')
    assert record is not None and record.branches == []


async def test_a_fresh_run_in_the_same_conversation_branches(store: SqliteConversationStore) -> None:
    await import_harness(store, HARNESS_DB)

    record = await store.read_record('billing-3')
    assert record is not None
    head = [searchable_text(entry.message) for entry in await store.read_history(record.head_id)]
    assert 'Show me invoice INV-7731.' in head[0]
    assert len(record.branches) == 1
    left = [searchable_text(entry.message) for entry in await store.read_history(record.branches[0])]
    assert 'Hello, I have a billing question.' in left[0]


async def test_externalized_tool_output_is_restored_and_searchable(store: SqliteConversationStore) -> None:
    await import_harness(store, HARNESS_DB)

    result = await search_index(store, SearchRequest(query='INV-7731 line 59', conversation_id='billing-3'))
    assert result.hits and result.hits[0].role == 'tool'
    conversation = await store.load('billing-3')
    assert conversation is not None
    tool_output = searchable_text(conversation.messages[2])
    assert 'INV-7731 line 0:' in tool_output and 'INV-7731 line 59:' in tool_output
    assert '__harness_external' not in json.dumps([str(m) for m in conversation.messages])


async def test_interrupted_snapshots_are_not_imported(store: SqliteConversationStore) -> None:
    await import_harness(store, HARNESS_DB)

    result = await search_index(store, SearchRequest(query='refund', conversation_id='orders-4'))
    assert result.hits == []


async def test_scope_is_applied_and_other_scopes_are_left_alone(store: SqliteConversationStore) -> None:
    await import_harness(store, HARNESS_DB, scope='acme')
    assert {r.scope for r in await store.list_conversations()} == {'acme'}
    stats = await store.stats()

    other = await import_harness(store, HARNESS_DB, scope='globex')

    assert other.stored == 0
    assert sorted(other.conflicts) == sorted({r['conversation_id'] for r in EXPECTED['runs'] if r['messages']})
    assert 'another scope' in other.describe()
    assert await store.stats() == stats


async def test_a_run_that_grew_since_the_last_import_appends_only_its_new_messages(
    store: SqliteConversationStore, harness_copy: Path
) -> None:
    with closing(sqlite3.connect(harness_copy)) as connection, connection:
        newest = connection.execute("SELECT max(seq) FROM snapshots WHERE conversation_id = 'support-1'").fetchone()[0]
        connection.execute('DELETE FROM snapshots WHERE seq = ?', (newest,))
    partial = await import_harness(store, harness_copy)
    before = await store.load('support-1')
    assert before is not None and len(before.messages) == 8

    full = await import_harness(store, HARNESS_DB)

    after = await store.load('support-1')
    assert after is not None and len(after.messages) == 10
    assert full.stored == 2
    assert partial.fingerprint == full.fingerprint


async def test_a_snapshot_with_missing_media_is_skipped_not_fatal(
    store: SqliteConversationStore, harness_copy: Path
) -> None:
    with closing(sqlite3.connect(harness_copy)) as connection, connection:
        connection.execute('DELETE FROM media')
    summary = await import_harness(store, harness_copy)

    # Both snapshots of billing-3's second run hold the invoice text; that run has nothing left to import.
    assert summary.skipped_snapshots == 2
    assert summary.empty_runs == 2
    assert 'unreadable snapshots skipped' in summary.describe()


async def test_progress_reports_every_run(store: SqliteConversationStore) -> None:
    calls: list[tuple[int, int]] = []
    await import_harness(store, HARNESS_DB, progress=lambda done, total: calls.append((done, total)))
    total = len(EXPECTED['runs'])
    assert calls == [(done, total) for done in range(total + 1)]


async def test_missing_file_is_refused(store: SqliteConversationStore, tmp_path: Path) -> None:
    with pytest.raises(HarnessImportError, match='does not exist'):
        await import_harness(store, tmp_path / 'nope.db')


async def test_a_file_that_is_not_sqlite_is_refused(store: SqliteConversationStore, tmp_path: Path) -> None:
    path = tmp_path / 'notes.db'
    path.write_text('these are not the tables you are looking for\n' * 100)
    with pytest.raises(HarnessImportError, match='not a SQLite database'):
        await import_harness(store, path)


async def test_a_sqlite_file_without_harness_tables_is_refused(store: SqliteConversationStore) -> None:
    # Our own store is SQLite too, but has no `runs`/`snapshots` tables.
    with pytest.raises(HarnessImportError, match='not a pydantic-ai-harness step database'):
        await import_harness(store, store.path)


async def test_snapshots_written_inline_by_older_harness_versions_read_the_same(
    store: SqliteConversationStore, harness_copy: Path
) -> None:
    # Before messages were stored once, a snapshot row held its whole history as a JSON list.
    with closing(sqlite3.connect(harness_copy)) as connection, connection:
        for (seq,) in connection.execute('SELECT seq FROM snapshots').fetchall():
            texts = [
                row[0]
                for row in connection.execute(
                    'SELECT m.message FROM snapshot_message_refs r JOIN snapshot_messages m ON m.sha256 = r.sha256 '
                    'WHERE r.snapshot_seq = ? ORDER BY r.position',
                    (seq,),
                )
            ]
            connection.execute('UPDATE snapshots SET messages = ? WHERE seq = ?', ('[' + ','.join(texts) + ']', seq))
        connection.execute('DROP TABLE snapshot_message_refs')
        connection.execute('DROP TABLE snapshot_messages')

    await import_harness(store, harness_copy)

    assert await stored_hashes(store) == expected_hashes()


def test_every_harness_summary_shape_is_dropped_from_a_snapshot_and_look_alikes_are_kept() -> None:
    """The shapes the search index leaves out are the ones an import drops: one rule, shared."""
    from temporal_recall.harness_import import _without_summaries  # pyright: ignore[reportPrivateUsage]
    from temporal_recall.text._documents import SUMMARY_METADATA, SUMMARY_PREFIX

    def request(*parts: dict[str, Any]) -> dict[str, Any]:
        return {'kind': 'request', 'parts': list(parts)}

    legacy = request({'part_kind': 'system-prompt', 'content': SUMMARY_PREFIX + 'older'})
    marked = request(
        {
            'part_kind': 'user-prompt',
            'content': [{'kind': 'text-content', 'content': 'x', 'metadata': SUMMARY_METADATA}],
        }
    )
    lookalike = request({'part_kind': 'system-prompt', 'content': 'Summary of previous conversation: ONYX'})
    dynamic = request({'part_kind': 'system-prompt', 'content': SUMMARY_PREFIX + 'mine', 'dynamic_ref': 'notes'})
    user_text = request({'part_kind': 'user-prompt', 'content': SUMMARY_PREFIX + 'typed by a person'})
    assert _without_summaries([legacy, marked, lookalike, dynamic, user_text]) == [lookalike, dynamic, user_text]
