"""The block codec: rows of stored blocks decode to each term's postings, whatever order they come in."""

from __future__ import annotations

import random

from temporal_recall.store import Posting, _blocks


def _row(term_id: int, postings: list[Posting]) -> tuple[int, int, bytes]:
    first_doc = postings[0].doc_id
    doc_ids, frequencies, lengths = zip(*postings, strict=True)
    return term_id, first_doc, _blocks.encode(first_doc, doc_ids, frequencies, lengths)


def _decoded(rows: list[tuple[int, int, bytes]]) -> dict[int, list[Posting]]:
    return {term_id: _blocks.postings_of(columns) for term_id, columns in _blocks.columns_of(rows).items()}


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
