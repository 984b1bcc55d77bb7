"""Pending segments (`_segments`): reads see the same postings before and after a merge, merges keep
each term's documents in order, and a write that fails during its merge leaves the store as it was."""

from __future__ import annotations

import logging
import random
from typing import Any

import pytest
from pydantic_ai.conversation import Conversation

from temporal_recall.store import SearchTarget, SqliteConversationStore
from temporal_recall.store.postings import _segments
from temporal_recall.store.postings import _writes as _block_writes
from temporal_recall.store.protocol import Posting

from ._support import (
    AnyStore,
    column_of,
    merge_everything,
    postings_of,
    problems_of,
    reply,
    rows_of,
    settle_merges,
    user,
)

WORDS = [f'w{number}' for number in range(40)]
SCOPES = ('acme', 'globex')


def _text(rng: random.Random) -> str:
    return ' '.join(rng.choices(WORDS, weights=[1 / (rank + 1) for rank in range(len(WORDS))], k=rng.randint(1, 12)))


async def _save(store: AnyStore, conversation_id: str, scope: str, texts: list[str]) -> None:
    conversation = await store.load(conversation_id) or Conversation(conversation_id=conversation_id)
    conversation.messages.extend(user(text) if at % 2 == 0 else reply(text) for at, text in enumerate(texts))
    await store.save(conversation, scope=scope)


async def _every_list(store: AnyStore, conversations: list[tuple[str, str]]) -> dict[Any, dict[str, list[Posting]]]:
    """Every term's postings, scope-wide and in each conversation."""
    lists: dict[Any, dict[str, list[Posting]]] = {}
    for scope in SCOPES:
        lists[scope] = await postings_of(store, SearchTarget(scope=scope, conversation_id=None, run_id=None), WORDS)
    for conversation_id, scope in conversations:
        narrowed = SearchTarget(scope=scope, conversation_id=conversation_id, run_id=None)
        lists[conversation_id] = await postings_of(store, narrowed, WORDS)
    return lists


@pytest.mark.parametrize('chunk', [100_000, 7], ids=['one-range-per-merge', 'many-ranges-per-merge'])
async def test_reads_see_the_same_postings_pending_merged_or_both(
    recall_store: AnyStore, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """Random writes to two tenants with merges every few writes, a direct write and deletes in between:
    at every step the store is consistent, and merging everything changes no posting list."""
    monkeypatch.setattr(_segments, 'MERGE_CHUNK', chunk)
    monkeypatch.setattr(_segments, 'MERGE_SEGMENTS', 3)
    monkeypatch.setattr(_segments, 'MERGE_POSTINGS', 60)
    monkeypatch.setattr(_segments, 'DIRECT_WRITE', 120)
    rng = random.Random(18)
    conversations: list[tuple[str, str]] = []
    for step in range(40):
        if conversations and rng.random() < 0.6:
            conversation_id, scope = rng.choice(conversations)
        else:
            conversation_id, scope = f'c{step}', rng.choice(SCOPES)
            conversations.append((conversation_id, scope))
        size = 14 if step == 20 else rng.randint(1, 3)  # Step 20 is a direct write (`DIRECT_WRITE`).
        await _save(recall_store, conversation_id, scope, [_text(rng) for _ in range(size)])
        if step in (15, 30):
            gone = conversations.pop(rng.randrange(len(conversations)))
            await recall_store.delete(gone[0])
        if step % 5 == 4:
            report = await recall_store.check()
            assert report.clean, report.findings
    assert await column_of(recall_store, 'SELECT count(*) FROM pending_postings') != [0]
    assert await column_of(recall_store, 'SELECT count(*) FROM posting_blocks') != [0]
    before = await _every_list(recall_store, conversations)
    assert any(before.values())
    await merge_everything(recall_store)
    assert await column_of(recall_store, 'SELECT count(*) FROM pending_postings') == [0]
    assert await column_of(recall_store, 'SELECT count(*) FROM index_segments') == [0]
    assert await _every_list(recall_store, conversations) == before
    assert await problems_of(recall_store) == []
    report = await recall_store.check()
    assert report.clean, report.findings


async def test_a_write_that_fails_in_its_merge_leaves_the_segments_and_blocks_as_they_were(
    recall_store: AnyStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_segments, 'MERGE_SEGMENTS', 3)
    await _save(recall_store, 'c', 'acme', ['kiwi pear', 'kiwi'])
    await _save(recall_store, 'c', 'acme', ['pear plum'])
    state = (
        'SELECT * FROM pending_postings '
        'UNION ALL SELECT tenant_id, -1, term_id, first_doc, last_doc, postings FROM posting_blocks'
    )
    before = sorted(map(repr, await rows_of(recall_store, state)))
    counters = sorted(map(repr, await rows_of(recall_store, 'SELECT * FROM index_segments')))

    async def broken(*args: Any) -> None:
        raise RuntimeError('the disk went away mid-merge')

    monkeypatch.setattr(_segments, 'append_to_blocks', broken)
    with pytest.raises(RuntimeError, match='mid-merge'):
        await merge_everything(recall_store)
    assert sorted(map(repr, await rows_of(recall_store, state))) == before
    assert sorted(map(repr, await rows_of(recall_store, 'SELECT * FROM index_segments'))) == counters
    if not isinstance(recall_store, SqliteConversationStore):
        # The merge runs after the write commits (`merge_off_path`): the write stands, its merge is logged.
        with caplog.at_level(logging.ERROR, logger='temporal_recall.store'):
            await _save(recall_store, 'c', 'acme', ['plum kiwi'])
            await settle_merges(recall_store)
        assert 'mid-merge' in caplog.text
        assert len((await recall_store.load('c') or Conversation()).messages) == 4
        after = sorted(map(repr, await rows_of(recall_store, state)))
        assert set(before) < set(after)  # Its own segment added; the rest as it was.
    else:
        with pytest.raises(RuntimeError, match='mid-merge'):
            await _save(recall_store, 'c', 'acme', ['plum kiwi'])
        assert sorted(map(repr, await rows_of(recall_store, state))) == before
        assert sorted(map(repr, await rows_of(recall_store, 'SELECT * FROM index_segments'))) == counters
        assert len((await recall_store.load('c') or Conversation()).messages) == 3
    monkeypatch.setattr(_segments, 'append_to_blocks', _block_writes.append_to_blocks)
    if isinstance(recall_store, SqliteConversationStore):
        await _save(recall_store, 'c', 'acme', ['plum kiwi'])
    await merge_everything(recall_store)
    assert await column_of(recall_store, 'SELECT count(*) FROM pending_postings') == [0]
    kiwi = await postings_of(recall_store, SearchTarget(scope='acme', conversation_id='c', run_id=None), ['kiwi'])
    assert len(kiwi['kiwi']) == 3
    report = await recall_store.check()
    assert report.clean, report.findings


@pytest.mark.parametrize('chunk', [1, 5, 12, 1_000])
def test_term_ranges_cover_every_term_once_in_order_and_stop_at_the_chunk(chunk: int) -> None:
    rng = random.Random(chunk)
    sizes = [(term_id, 12 * rng.choice([1, 1, 2, 3, 9])) for term_id in rng.sample(range(1, 500), 60)]
    postings = {term_id: size // 12 for term_id, size in sizes}
    ranges = _segments._term_ranges(sizes, chunk)  # pyright: ignore[reportPrivateUsage]
    terms = sorted(postings)
    covered = [[term for term in terms if low <= term <= high] for low, high in ranges]
    assert [term for group in covered for term in group] == terms  # Every term once, ranges in order.
    for group in covered:
        held = [postings[term] for term in group]
        assert sum(held[:-1]) < chunk  # A range ends at the first term that takes it to the chunk...
        if group is not covered[-1]:
            assert sum(held) >= chunk  # ...and not before.


async def test_a_merge_places_its_postings_range_by_range(
    recall_store: AnyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A merge never holds more than a chunk of postings (plus its last term's) at once, and moves them all."""
    monkeypatch.setattr(_segments, 'MERGE_SEGMENTS', 1_000)
    rng = random.Random(5)
    for step in range(12):
        await _save(recall_store, f'c{step}', 'acme', [_text(rng) for _ in range(3)])
    pending = await column_of(recall_store, 'SELECT coalesce(sum(postings), 0) FROM index_segments')
    placed: list[int] = []

    async def counting(session: Any, tenant_id: int, new: Any) -> None:
        placed.append(len(new.term_ids))
        await _block_writes.append_to_blocks(session, tenant_id, new)

    monkeypatch.setattr(_segments, 'append_to_blocks', counting)
    monkeypatch.setattr(_segments, 'MERGE_CHUNK', 10)
    before = await _every_list(recall_store, [])
    await merge_everything(recall_store)
    assert sum(placed) == sum(pending) and len(placed) > 3
    longest = max(len(postings) for postings in before['acme'].values())
    assert max(placed) < 10 + longest
    assert await _every_list(recall_store, []) == before
    report = await recall_store.check()
    assert report.clean, report.findings
