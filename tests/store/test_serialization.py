"""A document's stored term list: sorted ids as delta varints (LEB128), decoded back exactly."""

from __future__ import annotations

import random

import numpy as np

from temporal_recall.store.index._terms import decode_term_ids, encode_term_id_arrays, encode_term_ids


def test_a_term_list_decodes_to_its_sorted_ids() -> None:
    rng = random.Random(5)
    for _ in range(200):
        documents = [
            rng.sample(range(1, rng.choice([100, 20_000, 10**12, 2**62])), rng.randint(0, 30))
            for _ in range(rng.randint(1, 9))
        ]
        encoded = [encode_term_ids(document) for document in documents]
        assert [decode_term_ids(data) for data in encoded] == [sorted(document) for document in documents]


def test_an_id_on_a_seven_bit_boundary_takes_the_next_byte() -> None:
    assert [encode_term_ids(ids) for ids in ([128, 127], [128 + 16_384], [5], [])] == [
        b'\x7f\x01',
        b'\x80\x81\x01',
        b'\x05',
        b'',
    ]


def test_many_term_lists_encode_at_once_as_each_does_alone() -> None:
    rng = random.Random(51)
    for _ in range(100):
        documents = [
            rng.sample(range(1, rng.choice([100, 20_000, 10**12, 2**62])), rng.randint(0, 30))
            for _ in range(rng.randint(0, 12))
        ]
        ids = np.array([term_id for document in documents for term_id in document], dtype=np.int64)
        sizes = np.array([len(document) for document in documents], dtype=np.int64)
        assert encode_term_id_arrays(ids, sizes) == [encode_term_ids(document) for document in documents]
