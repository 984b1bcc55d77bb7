"""Pending rows are read segment by segment, by key, whatever the statistics say (`postings._blocks.by_segment`).

Every merge deletes the pending rows the writes added, so statistics taken while the table was empty
describe an empty table. On PostgreSQL that made the reads of pending rows take the tenant alone as
their index condition and step over every row the merges left dead; these tests analyse the table at
that moment and read the plans of the statements that read it.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from temporal_recall.store import SqliteConversationStore
from temporal_recall.store.postings import _segments
from temporal_recall.store.postings._blocks import pending
from temporal_recall.store.sql._session import Session

from ._support import AnyStore, column_of, merge_everything
from .test_segments import _save, _text  # pyright: ignore[reportPrivateUsage]


async def _plan(store: AnyStore, sql: str, *params: Any) -> list[str]:
    """How the store's backend reads `pending_postings` in `sql`: one line per access of the table."""
    sqlite = isinstance(store, SqliteConversationStore)

    async def explain(session: Session) -> list[Any]:
        return await session.rows(('EXPLAIN QUERY PLAN ' if sqlite else 'EXPLAIN (FORMAT JSON) ') + sql, *params)

    rows = await store._backend.run_read(explain)  # pyright: ignore[reportPrivateUsage]
    if sqlite:
        return [str(row[-1]) for row in rows if ' p ' in f' {row[-1]} ']
    found: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        if node.get('Relation Name') == 'pending_postings':
            found.append(f'{node["Node Type"]}: {node.get("Index Cond", "")} / {node.get("Filter", "")}')
        for child in node.get('Plans', []):
            walk(child)

    plan = rows[0][0]
    walk((json.loads(plan) if isinstance(plan, str) else plan)[0]['Plan'])
    return found


def _by_segment(access: str, *, terms: bool) -> bool:
    """Whether a table access is a key probe of one segment (and term), not a scan of the tenant's rows."""
    condition = access.split(' / ')[0]
    wanted = ['segment'] + (['term_id'] if terms else [])
    return ('Index' in access or 'PRIMARY KEY' in access) and all(
        f'{column} =' in condition or f'{column}=' in condition for column in wanted
    )


async def test_pending_rows_are_probed_by_segment_after_statistics_found_the_table_empty(
    recall_store: AnyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_segments, 'MERGE_SEGMENTS', 1_000)
    monkeypatch.setattr(_segments, 'MERGE_POSTINGS', 10**9)
    rng = random.Random(11)
    for step in range(60):
        await _save(recall_store, f'c{step}', 'acme', [_text(rng) for _ in range(4)])
    await merge_everything(recall_store)
    assert await column_of(recall_store, 'SELECT count(*) FROM pending_postings') == [0]

    # What an automatic analyse may record between two merges: an empty table.
    async def analyse(session: Session) -> None:
        await session.run('ANALYZE pending_postings')

    await recall_store._backend.run_write(analyse)  # pyright: ignore[reportPrivateUsage]
    for step in range(3):
        await _save(recall_store, f'late{step}', 'acme', [_text(rng), _text(rng)])
    [tenant_id] = await column_of(recall_store, 'SELECT tenant_id FROM tenants')
    segments = await column_of(recall_store, 'SELECT segment FROM index_segments ORDER BY segment')
    terms = await column_of(recall_store, 'SELECT term_id FROM terms ORDER BY term_id')
    assert len(segments) == 3 and len(terms) > 4
    dialect = recall_store._backend.dialect  # pyright: ignore[reportPrivateUsage]
    some_terms = dialect.array(terms[:4])
    reads = {
        'a search': (pending(dialect), (tenant_id, some_terms), True),
        "a merge's sizes": (_segments._pending_sizes(dialect), (tenant_id, dialect.array(segments)), False),  # pyright: ignore[reportPrivateUsage]
        "a merge's range": (
            _segments._pending_range(dialect),  # pyright: ignore[reportPrivateUsage]
            (tenant_id, dialect.array(segments), terms[0], terms[-1]),
            False,
        ),
    }
    for name, (sql, params, by_term) in reads.items():
        accesses = await _plan(recall_store, sql, *params)
        assert accesses, name
        assert all(_by_segment(access, terms=by_term) for access in accesses), (name, accesses)


def test_the_helpers_above_tell_a_probe_from_a_scan() -> None:
    # PostgreSQL's plan before: the tenant alone as the index condition, the segments filtered.
    assert not _by_segment("Index Scan: (tenant_id = '1'::bigint) / (segment = ANY ($0))", terms=False)
    assert _by_segment("Index Scan: ((tenant_id = '1'::bigint) AND (segment = s.segment)) / ", terms=False)
    assert _by_segment('SEARCH p USING PRIMARY KEY (tenant_id=? AND segment=? AND term_id=?)', terms=True)
    assert not _by_segment('SEARCH p USING PRIMARY KEY (tenant_id=?)', terms=False)
