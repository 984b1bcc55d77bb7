"""The stored forms `_serialization` writes: a document's term list round-trips, byte for byte as documented."""

from __future__ import annotations

import random

import numpy as np

from temporal_recall.store._serialization import decode_term_ids, encode_term_lists


def _varints(term_ids: list[int]) -> bytes:
    """The documented form, written out plainly: sorted ids, each as its delta from the one before, LEB128."""
    out = bytearray()
    previous = 0
    for term_id in sorted(term_ids):
        delta, previous = term_id - previous, term_id
        while delta >= 0x80:
            out.append(delta & 0x7F | 0x80)
            delta >>= 7
        out.append(delta)
    return bytes(out)


def test_term_lists_encode_each_document_as_sorted_delta_varints() -> None:
    rng = random.Random(5)
    for _ in range(200):
        documents = [
            rng.sample(range(1, rng.choice([100, 20_000, 10**12, 2**62])), rng.randint(0, 30))
            for _ in range(rng.randint(1, 9))
        ]
        flat = np.array([term_id for document in documents for term_id in document], dtype=np.int64)
        encoded = encode_term_lists(flat, [len(document) for document in documents])
        assert encoded == [_varints(document) for document in documents]
        assert [decode_term_ids(data) for data in encoded] == [sorted(document) for document in documents]


def test_an_id_on_a_seven_bit_boundary_takes_the_next_byte() -> None:
    flat = np.array([127, 128, 128 + 16_384, 5], dtype=np.int64)
    assert encode_term_lists(flat, [2, 1, 1]) == [b'\x7f\x01', b'\x80\x81\x01', b'\x05']
