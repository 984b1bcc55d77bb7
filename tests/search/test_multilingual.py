"""Every query of the multilingual table ranks its own message first (pure ranking, no store)."""

from __future__ import annotations

from collections import defaultdict

import pytest

from temporal_recall.search import parse_query, rank, term_frequencies
from temporal_recall.store.protocol import IndexStats, Posting

from ._multilingual import CORPUS, QUERIES


@pytest.mark.parametrize(('query', 'expected'), QUERIES)
def test_each_query_finds_its_message_first(query: str, expected: str) -> None:
    keys = list(CORPUS)
    postings: dict[str, list[Posting]] = defaultdict(list)
    total = 0
    for doc_id, key in enumerate(keys):
        frequencies, length = term_frequencies(CORPUS[key])
        total += length
        for term, frequency in frequencies.items():
            postings[term].append(Posting(doc_id, frequency, length))
    ranked = rank(IndexStats(document_count=len(keys), total_length=total), postings, parse_query(query).terms, limit=3)
    assert ranked, f'{query!r} found nothing'
    assert keys[ranked[0].doc_id] == expected
