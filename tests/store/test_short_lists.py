"""A scope-wide search of short posting lists reads them in the statement that resolves its terms, where each
statement is a round trip (`index._reader._RESOLVE_READING_SHORT`): a rare id's search sends two statements,
not three, and reads what every other path reads, of its tenant alone."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from temporal_recall.models import SearchRequest
from temporal_recall.search.plan import search_index
from temporal_recall.store import PostgresConversationStore
from temporal_recall.store.index import _reader
from temporal_recall.store.postings import _tiers
from temporal_recall.store.protocol import Posting, PostingColumns, SearchTarget, TieredPostings
from temporal_recall.store.sql._session import Session

from ._support import AnyStore, append_new, column_of, merge_everything, postings_of, settle_merges, user

WORDS = ['order', 'refund', 'parcel', 'late'] + [f'id{n}' for n in range(30)]
"""Common words among rarer ids: with `_tiers.LONG` left as it is, every list here is short."""


def _postings(columns: PostingColumns) -> list[Posting]:
    return [Posting(*posting) for posting in zip(*(column.tolist() for column in columns), strict=True)]


def _nothing_more(read: TieredPostings) -> dict[str, None]:
    return {}


async def _fill(store: AnyStore, rng: random.Random, numbers: range, scope: str) -> None:
    """A new conversation of `scope` per number, of one message of 2 to 12 of `WORDS`."""
    for number in numbers:
        await append_new(store, number, [user(' '.join(rng.choices(WORDS, k=rng.randint(2, 12))))], scope=scope)


async def _merged_and_pending(store: AnyStore) -> None:
    """Two tenants with the same words: most of each list merged into blocks, the rest still pending."""
    rng = random.Random(23)
    await _fill(store, rng, range(40), 'tenant')
    await _fill(store, rng, range(1_000, 1_040), 'other')  # conversation ids of their own
    await settle_merges(store)
    await merge_everything(store)
    await _fill(store, rng, range(40, 52), 'tenant')
    await _fill(store, rng, range(1_040, 1_052), 'other')


async def test_short_lists_read_with_their_terms_are_every_posting_of_the_tenant(recall_store: AnyStore) -> None:
    await _merged_and_pending(recall_store)
    assert await _pending_rows(recall_store) > 0
    target = SearchTarget(scope='tenant', conversation_id=None)
    for terms in (['id7'], ['id3', 'id19'], ['order', 'id11', 'nowhere'], WORDS):
        read = await recall_store.tiered_postings(target, terms, _nothing_more)
        assert read is not None and read.frontiers == {}
        expected = await postings_of(recall_store, target, terms)  # every posting, by another read
        assert expected  # the words are there
        found = {term: _postings(columns) for term, columns in read.known.items()}
        assert found == expected
        other = await postings_of(recall_store, SearchTarget(scope='other', conversation_id=None), terms)
        assert other and all(found.get(term) != postings for term, postings in other.items())


async def test_a_rare_id_is_two_statements_where_each_is_a_round_trip(
    recall_store: AnyStore, statements: list[str]
) -> None:
    await _merged_and_pending(recall_store)
    request = SearchRequest(query='id7', scope='tenant', all_conversations=True, limit=5)
    before = await search_index(recall_store, request)
    statements.clear()
    result = await search_index(recall_store, request)
    assert result.hits and result == before
    reading = [sql for sql in statements if 'posting_blocks' in sql or 'pending_postings' in sql]
    if isinstance(recall_store, PostgresConversationStore):
        assert len(statements) == 2, statements  # resolved with its postings, then the page's rows
        assert len(reading) == 1 and 'resolved' in reading[0]
    else:  # In-process: a statement is no round trip, and the terms are resolved on their own.
        assert len(reading) == 2


@pytest.mark.postgres
async def test_long_lists_are_not_read_with_their_terms(
    recall_store: AnyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lists that together reach `_tiers.LONG` are not read by the resolving statement, not even to be
    dropped after: a common word's tiers are read instead, and its blocks only if the tiers cannot prove
    the page."""
    if not isinstance(recall_store, PostgresConversationStore):
        pytest.skip('SQLite resolves its terms on their own: statements are no round trips')
    await _merged_and_pending(recall_store)
    target = SearchTarget(scope='tenant', conversation_id=None)
    terms = ['order', 'refund']
    listed = sum(len(postings) for postings in (await postings_of(recall_store, target, terms)).values())

    async def read(long: int) -> tuple[int, list[int]]:
        """The rows the statement returns, and how often its plan read `posting_blocks`."""
        monkeypatch.setattr(_tiers, 'LONG', long)

        async def run(session: Session) -> tuple[int, list[int]]:
            dialect = session.dialect
            sql = _reader._resolve_reading_short_sql(dialect)  # pyright: ignore[reportPrivateUsage]
            params = (*_reader._target_params(target), dialect.array(terms), long)  # pyright: ignore[reportPrivateUsage]
            plan = await session.value('EXPLAIN (ANALYZE, FORMAT JSON) ' + sql, *params)
            return len(await session.rows(sql, *params)), _loops(json.loads(plan) if isinstance(plan, str) else plan)

        return await recall_store._backend.run_read(run)  # pyright: ignore[reportPrivateUsage]

    rows, loops = await read(listed + 1)
    assert rows > len(terms) and loops and all(loops)  # short: a row per block and pending row
    rows, loops = await read(listed)
    assert rows == len(terms) and loops and not any(loops)  # long: a row per term, the blocks never read


def _loops(plan: list[dict[str, Any]]) -> list[int]:
    """How many times each node of `plan` (`EXPLAIN (ANALYZE, FORMAT JSON)`) reading `posting_blocks` ran."""
    found: list[int] = []

    def walk(node: dict[str, Any]) -> None:
        if node.get('Relation Name') == 'posting_blocks':
            found.append(int(node['Actual Loops']))
        for child in node.get('Plans', []):
            walk(child)

    walk(plan[0]['Plan'])
    return found


async def _pending_rows(store: AnyStore) -> int:
    [count] = await column_of(store, 'SELECT count(*) FROM pending_postings')
    return int(count)
