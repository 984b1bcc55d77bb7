"""A scope-wide search by meaning in bounded memory (`store/index/_vectors.py`): sign codes in memory, the
nearest of them read from the store and ranked exactly; on both backends."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from pydantic_ai import messages as m

from temporal_recall.embeddings._vectors import quantize
from temporal_recall.store import SearchTarget
from temporal_recall.store.index import _signs, _vectors

from ._support import AnyStore, Site, append_after, back_to_version_16, rows_of, run_sql

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
    per_vector = (codes.keys.nbytes + codes.roles.nbytes + codes.planes.nbytes) / codes.count
    assert per_vector == 8 + 2 + 16  # 96 dimensions padded to two 64-bit words


async def test_codes_are_read_in_bounded_batches_and_follow_writes(
    recall_store: AnyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_signs, 'SIGNS_READ', 50)
    monkeypatch.setattr(_signs, 'SIGNS_SCANNED', 64)
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
    monkeypatch.setattr(_signs, 'SIGNS_SCANNED', 128)  # three passes, the last one short
    rows = _signs.sign_codes(rng.standard_normal((300, DIMENSIONS)).astype(np.float32))
    query = _signs.sign_codes(rng.standard_normal(DIMENSIONS).astype(np.float32))
    planes = np.ascontiguousarray(rows.T)
    expected = [sum(bin(int(a) ^ int(b)).count('1') for a, b in zip(row, query, strict=True)) for row in rows.tolist()]
    assert _signs.distances(planes, query).tolist() == expected
    if hasattr(np, 'bitwise_count'):
        monkeypatch.delattr(np, 'bitwise_count')
    assert _signs.distances(planes, query).tolist() == expected


@pytest.mark.parametrize('kept', [1, 7, 64, 299, 300, 301])
def test_the_nearest_codes_are_as_many_as_asked_and_none_farther_than_any_left_out(kept: int) -> None:
    rng = np.random.default_rng(kept)
    found = rng.integers(0, 40, size=300).astype(np.uint16)  # many ties at every distance
    chosen = _signs.nearest_codes(found, kept)
    assert len(chosen) == min(kept, 300) == len(set(chosen.tolist()))
    left = np.setdiff1d(np.arange(300), chosen)
    if len(left):
        assert found[chosen].max() <= found[left].min()
    assert sorted(found[chosen].tolist()) == sorted(found.tolist())[:kept]


async def _counted(store: AnyStore) -> dict[int, tuple[int, int]]:
    """Per tenant: what `vector_counts` adds up to, and how many vectors are stored."""
    counted = dict(await rows_of(store, 'SELECT tenant_id, sum(vectors) FROM vector_counts GROUP BY tenant_id'))
    stored = dict(await rows_of(store, 'SELECT tenant_id, count(*) FROM document_vectors GROUP BY tenant_id'))
    return {t: (int(counted.get(t, 0)), int(stored.get(t, 0))) for t in counted.keys() | stored.keys()}


def _consistent(counts: dict[int, tuple[int, int]]) -> bool:
    return all(counted == stored for counted, stored in counts.values())


async def _search_matches_every_stored_vector(store: AnyStore, scope: str = 'acme') -> None:
    query = _queries(1, seed=5)[0]
    found = await store.nearest(SearchTarget(scope=scope, conversation_id=None), MODEL, query, 10)
    assert found is not None
    held = await rows_of(
        store,
        'SELECT count(*) FROM document_vectors v JOIN tenants t ON t.tenant_id = v.tenant_id '
        f"WHERE t.scope_key = 's:{scope}'",
    )
    assert found[1] == held[0][0]
    assert [doc for doc, _ in found[0]] == [doc for doc, _ in await _exact(store, scope, query, 10)]


async def test_the_vector_counts_follow_every_write_retry_and_deletion(recall_store: AnyStore) -> None:
    await _filled(recall_store, 10)
    await _filled(recall_store, 5, scope='globex', seed=8)
    await _search_matches_every_stored_vector(recall_store)
    await _filled(recall_store, 10)  # the same vectors again, as a retried write: nothing stored twice
    counts = await _counted(recall_store)
    assert sorted(stored for _, stored in counts.values()) == [20, 40] and _consistent(counts)
    record = await recall_store.read_record('acme-c3')
    assert record is not None
    await recall_store.delete_record('acme-c3', expected_revision=record.revision)
    await _filled(recall_store, 1, first=40, seed=9)  # four vectors out, four in: the count is as before
    counts = await _counted(recall_store)
    assert sorted(stored for _, stored in counts.values()) == [20, 40] and _consistent(counts)
    await _search_matches_every_stored_vector(recall_store)
    report = await recall_store.check()
    assert not report.findings, report.findings


async def test_another_model_replaces_the_vectors_and_their_counts(recall_store: AnyStore) -> None:
    await _filled(recall_store, 5)

    async def embed(texts: Any) -> Any:
        return quantize(np.ones((len(texts), 8), dtype=np.float32))

    await recall_store.reembed('test:other', embed)
    counts = await _counted(recall_store)
    assert [stored for _, stored in counts.values()] == [20] and _consistent(counts)


async def test_check_reports_a_vector_count_that_disagrees_with_the_vectors(recall_store: AnyStore) -> None:
    await _filled(recall_store, 5)
    await run_sql(recall_store, 'UPDATE vector_counts SET vectors = vectors + 1')
    (tenant,) = await rows_of(recall_store, "SELECT tenant_id FROM tenants WHERE scope_key = 's:acme'")
    report = await recall_store.check()
    assert [(f.kind, f.location) for f in report.findings] == [('index', f'vector_counts (tenant {tenant[0]})')]
    assert 'counts 21 vectors; stored: 20' in report.findings[0].detail


async def test_a_store_written_before_the_counts_counts_its_vectors_when_opened(site: Site) -> None:
    store = await site.open()
    try:
        await _filled(store, 6)
        await back_to_version_16(store)
    finally:
        await store.close()
    store = await site.open()
    try:
        counts = await _counted(store)
        assert [stored for _, stored in counts.values()] == [24] and _consistent(counts)
        await _search_matches_every_stored_vector(store)
    finally:
        await store.close()


async def test_writers_of_one_tenant_side_by_side_keep_the_count_exact(site: Site) -> None:
    """Four connections store overlapping vectors of one tenant at once (on PostgreSQL, in transactions
    that overlap): each vector is stored once and counted once, and no writer deadlocks another."""
    first = await site.open()
    stores = [first, *[await site.open() for _ in range(3)]]
    try:
        await _filled(first, 30)
        await run_sql(first, 'DELETE FROM document_vectors')
        await run_sql(first, 'DELETE FROM vector_counts')
        keys = [
            (bytes(row[0]).hex(), str(row[1]))
            for row in await rows_of(first, 'SELECT content_hash, role FROM documents ORDER BY doc_id')
        ]
        vectors = np.random.default_rng(1).standard_normal((len(keys), DIMENSIONS)).astype(np.float32)
        components, scales = quantize(vectors)

        async def write(store: AnyStore, start: int) -> None:
            for offset in range(start, len(keys), 3):
                end = min(len(keys), offset + 5)  # batches that overlap the next writer's
                await store.add_vectors('acme', MODEL, components[offset:end], scales[offset:end], keys[offset:end])

        await asyncio.gather(*(write(store, number) for number, store in enumerate(stores)))
        counts = await _counted(first)
        assert [stored for _, stored in counts.values()] == [len(keys)] and _consistent(counts)
        await _search_matches_every_stored_vector(first)
    finally:
        for store in stores:
            await store.close()
