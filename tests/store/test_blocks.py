"""The block codec: rows of stored blocks decode to each term's postings, whatever order they come in."""

from __future__ import annotations

import random

import pytest

from temporal_recall.store import Posting
from temporal_recall.store.postings import _blocks
from temporal_recall.store.postings import _writes as _block_writes


def _row(term_id: int, postings: list[Posting]) -> tuple[int, int, bytes]:
    first_doc = postings[0].doc_id
    doc_ids, frequencies, lengths = zip(*postings, strict=True)
    return term_id, first_doc, _blocks.encode(first_doc, doc_ids, frequencies, lengths)


def _decoded(rows: list[tuple[int, int, bytes]]) -> dict[int, list[Posting]]:
    return {
        term_id: [Posting(*posting) for posting in zip(*(column.tolist() for column in columns), strict=True)]
        for term_id, columns in _blocks.columns_of(rows).items()
    }


def test_rows_in_any_order_and_repeated_decode_to_each_terms_postings_in_document_order() -> None:
    rng = random.Random(9)
    lists = {
        term_id: [
            Posting(doc_id, rng.randint(1, 9), rng.randint(1, 400))
            for doc_id in sorted(rng.sample(range(1, 5_000_000_000), rng.randint(1, 40)))
        ]
        for term_id in (3, 7, 2**40)
    }
    rows = [
        _row(term_id, postings[start : start + 4])
        for term_id, postings in lists.items()
        for start in range(0, len(postings), 4)
    ]
    assert _decoded(rows) == lists
    for _ in range(20):
        shuffled = rows + rng.sample(rows, 3)  # Overlapping ranges can read a block twice.
        rng.shuffle(shuffled)
        assert _decoded(shuffled) == lists


def test_no_rows_is_no_postings() -> None:
    assert _blocks.columns_of([]) == {}


@pytest.mark.parametrize('block', [_blocks.BLOCK, _blocks.TIER_BLOCK, 3])
def test_a_write_is_placed_alike_in_python_and_as_arrays(block: int) -> None:
    """Small writes place their postings in Python, large ones with numpy: the same rows either way,
    in blocks of any size, with and without open tails, and with a tail too far below
    the new documents for 32-bit offsets."""
    rng = random.Random(block)
    for _ in range(300):
        docs = sorted(rng.sample(range(2**33, 2**33 + 400), rng.randint(1, 40)))
        flat = [
            (term_id, doc_id, rng.randint(1, 9), length)
            for doc_id, length in ((doc_id, rng.randint(1, 400)) for doc_id in docs)
            for term_id in rng.sample(range(1, 30), rng.randint(1, 12))
        ]
        new = _block_writes.NewPostings(*(list(column) for column in zip(*flat, strict=True)))
        tails = []
        written = sorted(set(new.term_ids))  # The read of open tails asks for the write's terms only.
        for term_id in sorted(rng.sample(written, rng.randint(0, len(written)))):
            first_doc = docs[0] - rng.choice([1, 50, 2**32 + 1])
            tails.append((term_id, first_doc, rng.randint(1, block - 1)))
        in_python = _block_writes._rows_in_python(1, new, tails, block)  # pyright: ignore[reportPrivateUsage]
        assert in_python == _block_writes._rows_as_arrays(1, new, tails, block)  # pyright: ignore[reportPrivateUsage]
        assert sum(row[4] for row in in_python) == len(flat)
