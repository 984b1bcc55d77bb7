"""The vector arm of the index: a vector per document, kept beside the BM25 documents, on any backend.

A vector is keyed like its document, by tenant, content hash and role rather than `doc_id`, so a
`reindex` keeps it and a content said again is embedded once. A store holds one model's vectors
(`vector_space`) and refuses another with `EmbeddingMismatch` rather than mix spaces. Vectors are
written after the step's append, in a transaction of their own, and read through the same membership
filter as BM25 (docs/design/semantic.md, "Storage" and "Searching").
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from temporal_recall.content import load_message
from temporal_recall.text._documents import document_texts

from ...errors import EmbeddingMismatch
from ..protocol import SearchTarget
from ..sql._bulk import CHUNK, insert_returning, insert_rows, select_batch
from ..sql._keys import scope_key
from ..sql._session import Backend, Session
from ._reader import Target, _documents_of, _stats, resolve
from ._signs import VectorSigns, decode, nearest_codes

__all__ = (
    'VectorKey',
    'VectorSigns',
    'count_unembedded',
    'existing_tenant',
    'forget_vectors',
    'nearest',
    'put_vectors',
    'reembed',
    'replace_space',
    'space',
    'unembedded',
    'without_vectors',
)

VectorKey = tuple[bytes, str]
"""`(content_hash, role)`: a document of a tenant, as its vector is keyed."""

_SPACE = 1
"""The one row of `vector_space`: a store holds the vectors of one model."""

_NO_VECTOR = (
    'NOT EXISTS (SELECT 1 FROM document_vectors v WHERE v.tenant_id = {tenant} '
    'AND v.content_hash = d.content_hash AND v.role = d.role)'
)
"""SQL true for a document `d` (a row of `documents`, or a key of a batch) that its tenant (`{tenant}`, an
expression) holds no vector for."""


async def space(session: Session) -> tuple[str, int] | None:
    """`(model, dimensions)` of the store's vectors; `None` before the first vector."""
    row = await session.one('SELECT model, dimensions FROM vector_space WHERE space = $1', _SPACE)
    return None if row is None else (str(row[0]), int(row[1]))


async def _claim_space(session: Session, model: str, dimensions: int) -> None:
    """Record `model` as the store's vector space if it has none; refuse another one."""
    await session.run(
        'INSERT INTO vector_space (space, model, dimensions) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING',
        _SPACE,
        model,
        dimensions,
    )
    stored = await space(session)
    if stored != (model, dimensions):
        assert stored is not None
        raise EmbeddingMismatch.between(stored, model, dimensions)


async def without_vectors(session: Session, scope: str | None, keys: Sequence[VectorKey]) -> list[VectorKey]:
    """Those of `keys` that `scope`'s tenant holds no vector for (in `keys` order), whether or not their
    documents exist yet: a step's documents are embedded before its append creates them."""
    if not keys:
        return []
    batch = session.dialect.batch((('content_hash', 'bytea'), ('role', 'text')))
    tenant = '(SELECT tenant_id FROM tenants WHERE scope_key = $3)'
    sql = f'SELECT d.content_hash, d.role FROM {batch} WHERE {_NO_VECTOR.format(tenant=tenant)}'  # noqa: S608
    key = scope_key(scope)
    found: set[VectorKey] = set()
    for start in range(0, len(keys), CHUNK):
        chunk = keys[start : start + CHUNK]
        if session.dialect.supports_array_parameters:
            rows = await session.rows(sql, [k[0] for k in chunk], [k[1] for k in chunk], key)
        else:
            rows = await select_batch(session, sql, [(content, role, key) for content, role in chunk])
        found.update((bytes(row[0]), str(row[1])) for row in rows)
    return [k for k in dict.fromkeys(keys) if k in found]


_VECTOR_COLUMNS = (
    ('tenant_id', 'bigint'),
    ('content_hash', 'bytea'),
    ('role', 'text'),
    ('vector', 'bytea'),
    ('scale', 'real'),
)


async def put_vectors(
    session: Session,
    model: str,
    components: NDArray[np.int8],
    scales: NDArray[np.float32],
    keys: Sequence[tuple[int, bytes, str]],
) -> None:
    """Store a vector per `(tenant_id, content_hash, role)` of `keys` (rows of `components`, `scales`),
    in `model`'s space; a vector already stored is kept (a retried write stores nothing twice)."""
    if not keys:
        return
    await _claim_space(session, model, int(components.shape[1]))
    rows = [
        (tenant_id, content, role, components[index].tobytes(), float(scales[index]))
        for index, (tenant_id, content, role) in enumerate(keys)
    ]
    inserted = await insert_returning(
        session, 'document_vectors', _VECTOR_COLUMNS, rows, 'tenant_id', on_conflict='ON CONFLICT DO NOTHING'
    )
    await _count(session, Counter(int(row[0]) for row in inserted), keys[0][1])


_COUNT_SHARDS = 16
"""Rows of `vector_counts` per tenant that writers add to: concurrent writers of one tenant on PostgreSQL
each lock the row of their shard until they commit, so sixteen of them seldom queue behind one row."""


async def _count(session: Session, added: Counter[int], content: bytes) -> None:
    """Add `added` (vectors per tenant, negative when deleted) to `vector_counts`, as the write's last
    statement and in tenant order: a transaction holds a count's row only until it commits, and two
    transactions take their rows in one order, so they never deadlock. The shard is drawn from
    `content` (what the write stores), so concurrent writers spread over the shards."""
    shard = content[0] % _COUNT_SHARDS if content else 0
    rows = sorted((tenant_id, shard, change) for tenant_id, change in added.items() if change)
    await insert_rows(
        session,
        'vector_counts',
        (('tenant_id', 'bigint'), ('shard', 'integer'), ('vectors', 'bigint')),
        rows,
        order_by='tenant_id',
        on_conflict='ON CONFLICT (tenant_id, shard) DO UPDATE SET vectors = vector_counts.vectors + excluded.vectors',
    )


async def existing_tenant(session: Session, scope: str | None) -> int | None:
    """The tenant id of `scope`, or `None` when nothing was ever stored under it (no tenant is created)."""
    value = await session.value('SELECT tenant_id FROM tenants WHERE scope_key = $1', scope_key(scope))
    return None if value is None else int(value)


async def replace_space(session: Session, model: str, dimensions: int) -> bool:
    """Make `model` the store's space; the vectors of another model are deleted. Whether they were."""
    stored = await space(session)
    if stored == (model, dimensions):
        return False
    await session.run('DELETE FROM document_vectors')
    await session.run('DELETE FROM vector_counts')
    await session.run('DELETE FROM vector_space')
    await _claim_space(session, model, dimensions)
    return stored is not None


async def unembedded(session: Session, after: int, limit: int) -> list[tuple[int, int, bytes, str, str]]:
    """Up to `limit` documents without a vector, `doc_id` above `after`, in `doc_id` order:
    `(doc_id, tenant_id, content_hash, role, message JSON of an entry holding it)`."""
    sql = (  # noqa: S608 (fixed names; values are parameters)
        'SELECT d.doc_id, d.tenant_id, d.content_hash, d.role, e.message FROM documents d '
        'JOIN entries e ON e.entry_key = (SELECT m.entry_key FROM conversation_documents m '
        'WHERE m.doc_id = d.doc_id LIMIT 1) WHERE d.doc_id > $1 AND {no_vector} ORDER BY d.doc_id LIMIT $2'
    ).format(no_vector=_NO_VECTOR.format(tenant='d.tenant_id'))
    rows = await session.rows(sql, after, limit)
    return [(int(r[0]), int(r[1]), bytes(r[2]), str(r[3]), str(r[4])) for r in rows]


async def forget_vectors(session: Session, doc_ids: Sequence[int]) -> None:
    """Delete the vectors of documents about to leave the index (`_membership.release_members`), so a
    deleted conversation's meaning is not kept either."""
    dialect = session.dialect
    sql = (
        'DELETE FROM document_vectors WHERE (tenant_id, content_hash, role) IN (SELECT d.tenant_id, '  # noqa: S608
        f'd.content_hash, d.role FROM documents d WHERE d.doc_id {dialect.in_array(1, "bigint")}) '
        'RETURNING tenant_id, content_hash'
    )
    removed: Counter[int] = Counter()
    content = b''
    for start in range(0, len(doc_ids), CHUNK):
        rows = await session.rows(sql, dialect.array(doc_ids[start : start + CHUNK]))
        removed.subtract(int(row[0]) for row in rows)
        content = content or (bytes(rows[0][1]) if rows else b'')
    await _count(session, removed, content)


async def count_unembedded(session: Session) -> int:
    """How many documents of the store have no vector (what `reembed` has left to do)."""
    sql = f'SELECT count(*) FROM documents d WHERE {_NO_VECTOR.format(tenant="d.tenant_id")}'  # noqa: S608
    return int(await session.value(sql))


# --- Reading: the nearest documents of a search target ---------------------------------------------


RESCORED_SHARE = 0.01
"""The share of a tenant's vectors (the nearest by sign code) read and scored exactly, at least
`RESCORED_AT_LEAST`. On the scale corpus at 1,000,000 vectors, recall@10 against the exact ranking
was 0.951 with 1% (0.922 with 0.5%), for about 20 ms more a search (docs/design/semantic.md, "Scale")."""
RESCORED_AT_LEAST = 1000
"""The fewest vectors a scope-wide search scores exactly: a tenant this size or smaller is ranked exactly."""
RESCORED_READ = 2048
"""Vectors read and scored per statement; only each read's best `limit` are kept, so what a search holds
stays this size however many vectors it scores."""


async def nearest(
    session: Session,
    target: SearchTarget,
    model: str,
    query: NDArray[np.float32],
    limit: int,
    signs: VectorSigns,
) -> tuple[list[tuple[int, float]], int] | None:
    """The target's `limit` documents nearest `query` (a unit vector of `model`), best first, as
    `(doc_id, cosine)`, and how many documents with vectors the target holds; `None` when the target's
    conversation or run does not exist in its scope (as `IndexReader.index_stats`).

    Raises:
        EmbeddingMismatch: the store's vectors are of another model or dimension.
    """
    found = await resolve(session, target)
    if found is None:
        return None if await _stats(session, target, None) is None else ([], 0)
    stored = await space(session)
    if stored is None:
        return [], 0
    if stored != (model, len(query)):
        raise EmbeddingMismatch.between(stored, model, len(query))
    resolved = found[0]
    allowed = await _documents_of(session, resolved)
    if allowed is None:
        return await _nearest_in_tenant(session, resolved, model, query, limit, signs)
    return await _nearest_among(session, resolved.tenant_id, allowed, query, limit)


def _top(scores: NDArray[np.float32], limit: int) -> NDArray[np.intp]:
    """Indices of the `limit` best scores, best first."""
    chosen = np.argpartition(-scores, limit - 1)[:limit] if len(scores) > limit else np.arange(len(scores))
    return chosen[np.argsort(-scores[chosen], kind='stable')]


async def _nearest_in_tenant(
    session: Session, resolved: Target, model: str, query: NDArray[np.float32], limit: int, signs: VectorSigns
) -> tuple[list[tuple[int, float]], int]:
    """A target spanning its tenant: the vectors nearest by sign code (`RESCORED_SHARE` of them), read
    from the store and ranked exactly, then the ids of the best documents."""
    codes = await signs.of(session, resolved.tenant_id, model, len(query))
    if not codes.count:
        return [], 0
    distances = codes.distances(query)
    eligible = codes.count
    if resolved.role is not None:
        wanted_role = codes.role_code(resolved.role)
        if wanted_role is None:
            return [], codes.count
        outside = codes.roles != wanted_role
        distances[outside] = np.iinfo(np.uint16).max
        eligible -= int(np.count_nonzero(outside))
    kept = min(eligible, max(RESCORED_AT_LEAST, math.ceil(codes.count * RESCORED_SHARE)))
    if not kept:
        return [], codes.count
    candidates = np.sort(codes.keys[nearest_codes(distances, kept)]).tolist()
    dialect = session.dialect
    best: list[tuple[float, int, bytes, str]] = []
    for start in range(0, len(candidates), RESCORED_READ):
        rows = await session.rows(
            'SELECT vector_key, content_hash, role, vector, scale FROM document_vectors '  # noqa: S608
            f'WHERE tenant_id = $1 AND vector_key {dialect.in_array(2, "bigint")} ORDER BY vector_key',
            resolved.tenant_id,
            dialect.array(candidates[start : start + RESCORED_READ]),
        )
        scores = decode([r[3] for r in rows], [float(r[4]) for r in rows], len(query)) @ query
        best += [(float(scores[i]), int(rows[i][0]), bytes(rows[i][1]), str(rows[i][2])) for i in _top(scores, limit)]
    if not best:
        return [], codes.count
    # Best first; equal scores in key order, as the vectors were stored (the order an exhaustive ranking gives).
    best = sorted(best, key=lambda hit: (-hit[0], hit[1]))[:limit]
    wanted = [(content, role) for _, _, content, role in best]
    sql = (  # noqa: S608 (fixed names; values are parameters)
        'SELECT x.doc_id, x.content_hash, x.role FROM {batch} JOIN documents x ON x.tenant_id = $3 '
        'AND x.content_hash = d.content_hash AND x.role = d.role'
    ).format(batch=dialect.batch((('content_hash', 'bytea'), ('role', 'text'))))
    if dialect.supports_array_parameters:
        found = await session.rows(sql, [w[0] for w in wanted], [w[1] for w in wanted], resolved.tenant_id)
    else:
        found = await select_batch(session, sql, [(content, role, resolved.tenant_id) for content, role in wanted])
    ids = {(bytes(row[1]), str(row[2])): int(row[0]) for row in found}
    # A vector whose document left the index (its conversation deleted since) is not a hit.
    ranked = [(ids[key], hit[0]) for key, hit in zip(wanted, best, strict=True) if key in ids]
    return ranked, codes.count


async def _nearest_among(
    session: Session, tenant_id: int, allowed: NDArray[np.int64], query: NDArray[np.float32], limit: int
) -> tuple[list[tuple[int, float]], int]:
    """A narrowed target (a conversation, a run, a role): the vectors of its documents, read by id."""
    doc_ids: list[int] = []
    blobs: list[bytes] = []
    scales: list[float] = []
    dialect = session.dialect
    for start in range(0, len(allowed), CHUNK):
        chunk = [int(doc_id) for doc_id in allowed[start : start + CHUNK]]
        # The ids drive: one key lookup each (SQLite's planner would otherwise scan the tenant's documents).
        rows = await session.rows(
            f'SELECT x.doc_id, v.vector, v.scale FROM {dialect.each(2, "bigint")} {dialect.join_in_order} '  # noqa: S608
            'documents x ON x.doc_id = value JOIN document_vectors v '
            'ON v.tenant_id = x.tenant_id AND v.content_hash = x.content_hash AND v.role = x.role '
            'WHERE x.tenant_id = $1',
            tenant_id,
            dialect.array(chunk),
        )
        for row in rows:
            doc_ids.append(int(row[0]))
            blobs.append(bytes(row[1]))
            scales.append(float(row[2]))
    if not doc_ids:
        return [], 0
    scores = decode(blobs, scales, len(query)) @ query
    return [(doc_ids[index], float(scores[index])) for index in _top(scores, limit)], len(doc_ids)


# --- Re-embedding: `recall reindex --embeddings` -------------------------------------------------------

Quantized = tuple[NDArray[np.int8], NDArray[np.float32]]
"""int8 components and a scale per vector (`embeddings._vectors.quantize`)."""

REEMBED_BATCH = 256
"""Documents embedded per model call and stored per transaction by `reembed`."""


async def reembed(
    backend: Backend,
    model: str,
    embed: Callable[[Sequence[str]], Awaitable[Quantized]],
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Give every document of the store a vector of `model` (`embed` makes them); returns how many were made.

    A store whose vectors are another model's (or dimension's) has them deleted first, in the
    transaction that records `model`; then the documents without a vector are embedded in batches
    of `REEMBED_BATCH`, each stored in a transaction of its own, so an interrupted run resumes where
    it stopped and writers are never held for long. `progress(done, total)` follows the batches.
    """
    probe = (await embed(['dimension probe']))[0]
    await backend.run_write(lambda s: replace_space(s, model, int(probe.shape[1])))
    total = await backend.run_read(count_unembedded)
    done, after = 0, 0
    if progress is not None:
        progress(0, total)
    while True:
        batch = await backend.run_read(lambda s, after=after: unembedded(s, after, REEMBED_BATCH))
        if not batch:
            return done
        keys: list[tuple[int, bytes, str]] = []
        texts: list[str] = []
        for _, tenant_id, content, role, message in batch:
            text = dict(document_texts(load_message(message))).get(role)
            if text is not None:
                keys.append((tenant_id, content, role))
                texts.append(text)
        if texts:
            components, scales = await embed(texts)
            await backend.run_write(lambda s, c=components, v=scales, k=keys: put_vectors(s, model, c, v, k))
        done += len(batch)
        after = batch[-1][0]
        if progress is not None:
            progress(min(done, total), total)
