"""English rankings do not move with the analyzer: same hits, same scores, on a fixture corpus.

The corpus is the benchmark's generated conversations (Zipf vocabulary, ticket ids, order numbers,
file paths, tool calls and returns) plus a hand-written support conversation with the punctuation
English text carries. Each is indexed twice, once with today's analyzer and once with the rule of
version 1 written out here independently, and every query must rank identically, bit for bit.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any, cast

from bench._workload import Generator
from pydantic_ai import messages as m

from temporal_recall.search import parse_query, rank, searchable_text, term_frequencies
from temporal_recall.store.protocol import IndexStats, Posting

_VERSION_1_WORD = re.compile(r'\w+')

Analyse = Callable[[str], tuple[Counter[str], int]]


def version_1(text: str) -> tuple[Counter[str], int]:
    terms = [word.lower()[:64] for word in _VERSION_1_WORD.findall(text)]
    return Counter(terms), len(terms)


SUPPORT = [
    'Hi — I ordered a “standing desk” last week (order #A-20931) and it hasn’t arrived.',
    'Sorry to hear that! Let me look up order A-20931 for you.',
    'lookup_order\n{"order_id": "A-20931", "include_tracking": true}',
    'lookup_order\n{"status": "in_transit", "carrier": "UPS", "eta": "2026-03-04", "tracking": "1Z999AA10123456784"}',
    'Your desk is in transit with UPS; tracking 1Z999AA10123456784, expected March 4th.',
    'Can you change the delivery address to 221B Baker St., London NW1 6XE?',
    'update_address\n{"order_id": "A-20931", "address": "221B Baker St., London NW1 6XE"}',
    'Done: the address on order A-20931 is now 221B Baker St. The carrier was notified.',
    "Thanks! Also, what's the return policy if the desk's motor is faulty?",
    'Returns are free within 30 days; a faulty motor is covered for 5 years under warranty.',
]


def corpus() -> tuple[list[str], list[str]]:
    """The searchable texts of the fixture messages, and the benchmark's queries over them."""
    generator = Generator(20260301)
    data = generator.conversation('pinned', 800)
    runs = cast(list[dict[str, Any]], data['runs'])
    raw = [message for run in runs for step in run['steps'] for message in step]
    messages = m.ModelMessagesTypeAdapter.validate_json(json.dumps(raw))
    return [*(searchable_text(message) for message in messages), *SUPPORT], generator.queries(200)


def index(texts: list[str], analyse: Analyse) -> tuple[IndexStats, dict[str, list[Posting]]]:
    postings: dict[str, list[Posting]] = defaultdict(list)
    total = 0
    for doc_id, text in enumerate(texts):
        frequencies, length = analyse(text)
        total += length
        for term, frequency in frequencies.items():
            postings[term].append(Posting(doc_id=doc_id, term_frequency=frequency, length=length))
    return IndexStats(document_count=len(texts), total_length=total), dict(postings)


def test_english_queries_rank_exactly_as_with_version_1() -> None:
    texts, generated = corpus()
    queries = [
        *generated,
        'order A-20931',
        'UPS tracking',
        "hasn't arrived",
        'desk motor warranty',
        'Baker St',
        '1Z999AA10123456784',
        'return policy',
    ]
    current = index(texts, term_frequencies)
    before = index(texts, version_1)
    assert current == before  # the same index, term for term and length for length
    compared = 0
    for text in queries:
        terms = parse_query(text).terms
        assert list(terms) == list(dict.fromkeys(version_1(text)[0]))
        ranked = rank(*current, terms, limit=20)
        assert ranked == rank(*before, list(dict.fromkeys(version_1(text)[0])), limit=20)
        compared += bool(ranked)
    assert compared > 150  # the queries do find things: the comparison is not vacuous
