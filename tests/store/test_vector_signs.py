"""A scope-wide search by meaning in bounded memory (`store/index/_vectors.py`): sign codes in memory, the
nearest of them read from the store and ranked exactly; on both backends."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from pydantic_ai import messages as m

from temporal_recall.embeddings._vectors import quantize
from temporal_recall.store import SearchTarget
from temporal_recall.store.index import _vectors

from ._support import AnyStore, append_after, rows_of

MODEL = 'test:random'
DIMENSIONS = 96
"""Not a multiple of 64: the last word of every code is padded."""
_WORDS = [
    'parcel',
    'depot',
    'invoice',
    'refund',
    'courier',
    'address',
    'window',
    'ticket',
    'warehouse',
    'label',
    'carrier',
    'driver',
]


async def _filled(store: AnyStore, conversations: int, *, first: int = 0, scope: str = 'acme', seed: int = 7) -> None:
    """`conversations` conversations of 4 messages (numbered from `first`), then a random vector for every
    document of `scope` that has none."""
    rng = random.Random(seed)
    for number in range(first, first + conversations):
        texts = [' '.join(rng.choices(_WORDS, k=6)) + f' {scope}-{number}-{index}' for index in range(4)]
        messages: list[m.ModelMessage] = [
            m.ModelRequest(parts=[m.UserPromptPart(texts[0])]),
            m.ModelResponse(parts=[m.TextPart(texts[1])]),
            m.ModelRequest(parts=[m.UserPromptPart(texts[2])]),
            m.ModelResponse(parts=[m.TextPart(texts[3])]),
        ]
        await append_after(store, f'{scope}-c{number}', scope, [], messages)
    keys = [
        (bytes(row[0]).hex(), str(row[1]))
        for row in await rows_of(
            store,
            'SELECT d.content_hash, d.role FROM documents d JOIN tenants t ON t.tenant_id = d.tenant_id '
            f"WHERE t.scope_key = 's:{scope}' ORDER BY d.doc_id",
        )
    ]
    vectors = np.random.default_rng(seed).standard_normal((len(keys), DIMENSIONS)).astype(np.float32)
    vectors += 2.0  # a shared direction, as the texts of one tenant have
    components, scales = quantize(vectors)
    await store.add_vectors(scope, MODEL, components, scales, keys)


async def _exact(store: AnyStore, scope: str, query: NDArray[np.float32], limit: int) -> list[tuple[int, float]]:
    """The ranking every vector of the tenant scored against `query` gives, as `nearest` answers it."""
    rows = await rows_of(
        store,
        'SELECT d.doc_id, v.vector, v.scale FROM document_vectors v JOIN tenants t ON t.tenant_id = v.tenant_id '
        'JOIN documents d ON d.tenant_id = v.tenant_id AND d.content_hash = v.content_hash AND d.role = v.role '
        f"WHERE t.scope_key = 's:{scope}' ORDER BY v.vector_key",
    )
    components = np.frombuffer(b''.join(bytes(row[1]) for row in rows), dtype=np.int8).reshape(len(rows), -1)
    scores = (components.astype(np.float32) * np.array([row[2] for row in rows], dtype=np.float32)[:, None]) @ query
    order = np.argsort(-scores, kind='stable')[:limit]
    return [(int(rows[index][0]), float(scores[index])) for index in order]


def _queries(count: int, seed: int = 11) -> list[NDArray[np.float32]]:
    rng = np.random.default_rng(seed)
    queries = rng.standard_normal((count, DIMENSIONS)).astype(np.float32) + 2.0
    return [query / np.linalg.norm(query) for query in queries]


def _signs_of(store: AnyStore) -> Any:
    (codes,) = store._signs.by_tenant.values()  # pyright: ignore[reportAttributeAccessIssue]
    return codes


async def test_a_tenant_within_the_exactly_ranked_floor_is_ranked_exactly(recall_store: AnyStore) -> None:
    await _filled(recall_store, 40)
    await _filled(recall_store, 10, scope='globex', seed=8)  # another tenant, never seen
    target = SearchTarget(scope='acme', conversation_id=None)
    for query in _queries(12):
        found = await recall_store.nearest(target, MODEL, query, 10)
        assert found is not None
        hits, held = found
        assert held == 160
        exact = await _exact(recall_store, 'acme', query, 10)
        assert [doc for doc, _ in hits] == [doc for doc, _ in exact]
        assert [score for _, score in hits] == pytest.approx([score for _, score in exact])


async def test_past_the_floor_only_the_nearest_codes_are_read_and_scored_exactly(
    recall_store: AnyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With 24 of 160 vectors read, every hit is a document of the tenant with its exact score, best
    first, and the best of the 24 by exact score; and a role filter keeps to its role."""
    monkeypatch.setattr(_vectors, 'RESCORED_AT_LEAST', 24)
    monkeypatch.setattr(_vectors, 'RESCORED_SHARE', 0.0)
    await _filled(recall_store, 40)
    target = SearchTarget(scope='acme', conversation_id=None)
    users = set(int(row[0]) for row in await rows_of(recall_store, "SELECT doc_id FROM documents WHERE role = 'user'"))
    overlap = 0
    for query in _queries(20):
        found = await recall_store.nearest(target, MODEL, query, 10)
        assert found is not None
        hits, _ = found
        exact = dict(await _exact(recall_store, 'acme', query, 160))
        assert len(hits) == 10
        assert all(score == pytest.approx(exact[doc]) for doc, score in hits)
        assert [score for _, score in hits] == sorted((score for _, score in hits), reverse=True)
        overlap += len({doc for doc, _ in hits} & set(list(exact)[:10]))
        by_role = await recall_store.nearest(
            SearchTarget(scope='acme', conversation_id=None, role='user'), MODEL, query, 10
        )
        assert by_role is not None
        assert by_role[0] and {doc for doc, _ in by_role[0]} <= users
    assert overlap > 20 * 10 * 0.3  # far better than 24 vectors drawn at random (15%)


async def test_codes_hold_a_key_a_role_and_a_bit_per_dimension(recall_store: AnyStore) -> None:
    await _filled(recall_store, 40)
    await recall_store.nearest(SearchTarget(scope='acme', conversation_id=None), MODEL, _queries(1)[0], 10)
    codes = _signs_of(recall_store)
    assert codes.count == 160
    per_vector = (codes.keys.nbytes + codes.roles.nbytes + codes.signs.nbytes) / codes.count
    assert per_vector == 8 + 2 + 16  # 96 dimensions padded to two 64-bit words


async def test_codes_are_read_in_bounded_batches_and_follow_writes(
    recall_store: AnyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_vectors, 'SIGNS_READ', 50)
    monkeypatch.setattr(_vectors, 'SIGNS_SCANNED', 64)
    await _filled(recall_store, 20)
    target = SearchTarget(scope='acme', conversation_id=None)
    query = _queries(1)[0]
    found = await recall_store.nearest(target, MODEL, query, 5)
    assert found is not None and found[1] == 80
    assert [d for d, _ in found[0]] == [d for d, _ in await _exact(recall_store, 'acme', query, 5)]
    await _filled(recall_store, 10, first=20, seed=9)  # 40 more vectors
    found = await recall_store.nearest(target, MODEL, query, 5)
    assert found is not None and found[1] == 120
    assert _signs_of(recall_store).count == 120
    assert [d for d, _ in found[0]] == [d for d, _ in await _exact(recall_store, 'acme', query, 5)]


def test_distances_are_the_same_without_numpys_popcount(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    signs = _vectors._signs(rng.standard_normal((300, DIMENSIONS)).astype(np.float32))  # pyright: ignore[reportPrivateUsage]
    query = _vectors._signs(rng.standard_normal(DIMENSIONS).astype(np.float32))  # pyright: ignore[reportPrivateUsage]
    expected = [sum(bin(int(a) ^ int(b)).count('1') for a, b in zip(row, query, strict=True)) for row in signs.tolist()]
    assert _vectors._distances(signs, query).tolist() == expected  # pyright: ignore[reportPrivateUsage]
    if hasattr(np, 'bitwise_count'):
        monkeypatch.delattr(np, 'bitwise_count')
    assert _vectors._distances(signs, query).tolist() == expected  # pyright: ignore[reportPrivateUsage]
