"""A pruned search's lookups (`postings._blocks.read_lookups`): the postings of the documents asked for, per
term, from the tenant's blocks only, on both backends."""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from temporal_recall.store import Posting
from temporal_recall.store.postings import _blocks
from temporal_recall.store.sql._session import Session

from ._support import AnyStore

TENANT, OTHER = 7, 5


def _lists(rng: random.Random) -> dict[int, list[Posting]]:
    """Three terms' postings, ids on both sides of 2**62 (derived and allocated documents)."""
    return {
        term_id: [
            Posting(doc_id, rng.randint(1, 9), rng.randint(1, 400))
            for doc_id in sorted(rng.sample([*range(1_000, 1_400), *range(2**62, 2**62 + 200)], rng.randint(20, 90)))
        ]
        for term_id in (1, 2, 3)
    }


def _rows(tenant_id: int, lists: dict[int, list[Posting]], block: int) -> list[tuple[Any, ...]]:
    """Blocks of up to `block` postings, a new one where an offset would not fit in 32 bits."""
    rows: list[tuple[Any, ...]] = []
    for term_id, postings in lists.items():
        parts: list[list[Posting]] = []
        for posting in postings:
            if not parts or len(parts[-1]) == block or posting.doc_id - parts[-1][0].doc_id >= 2**32:
                parts.append([])
            parts[-1].append(posting)
        for part in parts:
            doc_ids, frequencies, lengths = zip(*part, strict=True)
            stored = _blocks.encode(doc_ids[0], doc_ids, frequencies, lengths)
            rows.append((tenant_id, term_id, doc_ids[0], doc_ids[-1], len(part), b'', stored))
    return rows


async def test_lookups_find_the_asked_documents_postings_of_the_tenant_alone(recall_store: AnyStore) -> None:
    """Documents held and not held, before the first block, in gaps and after the last, several in one
    block; the other tenant's blocks hold the same terms, one of them in blocks starting where the
    tenant's do, with other counts."""
    rng = random.Random(51)
    mine, theirs = _lists(rng), _lists(rng)
    theirs[1] = [Posting(posting.doc_id, posting.term_frequency + 1, posting.length) for posting in mine[1]]
    backend = recall_store._db  # pyright: ignore[reportPrivateUsage]

    async def write(session: Session) -> None:
        await session.many(
            'INSERT INTO posting_blocks (tenant_id, term_id, first_doc, last_doc, count, front, postings) '
            'VALUES ($1, $2, $3, $4, $5, $6, $7)',
            [*_rows(TENANT, mine, 4), *_rows(OTHER, {1: theirs.pop(1)}, 4), *_rows(OTHER, theirs, 3)],
        )

    await backend.run_write(write)
    for _ in range(30):
        asked: dict[int, np.ndarray[Any, np.dtype[np.int64]]] = {}
        for term_id, postings in mine.items():
            held = [posting.doc_id for posting in postings]
            elsewhere = [posting.doc_id for posting in theirs.get(term_id, mine[term_id])]
            pool = {*rng.sample(held, rng.randint(0, len(held))), *rng.sample(elsewhere, 5), 1, 999, 1_200, 2**62 + 500}
            asked[term_id] = np.array(sorted(rng.sample(sorted(pool), rng.randint(0, len(pool)))), dtype=np.int64)

        async def read(session: Session, asked: dict[int, Any] = asked) -> dict[int, Any]:
            return await _blocks.read_lookups(session, TENANT, asked)

        found = await backend.run_read(read)
        expected = {
            term_id: [posting for posting in mine[term_id] if posting.doc_id in set(asked[term_id].tolist())]
            for term_id in mine
        }
        got = {
            term_id: [Posting(*posting) for posting in zip(*(column.tolist() for column in columns), strict=True)]
            for term_id, columns in found.items()
        }
        assert {term_id: postings for term_id, postings in got.items() if postings} == {
            term_id: postings for term_id, postings in expected.items() if postings
        }


async def test_no_documents_asked_reads_nothing(recall_store: AnyStore) -> None:
    async def read(session: Session) -> dict[int, Any]:
        return await _blocks.read_lookups(session, TENANT, {1: np.empty(0, dtype=np.int64)})

    assert await recall_store._db.run_read(read) == {}  # pyright: ignore[reportPrivateUsage]
