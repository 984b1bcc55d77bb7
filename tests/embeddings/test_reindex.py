"""`recall reindex --embeddings`: a store written without an embedder gets its vectors; another model's are replaced."""

from __future__ import annotations

from typing import Any

from pydantic_ai.embeddings import Embedder

from temporal_recall.embeddings import LOCAL_MODEL
from temporal_recall.embeddings._index import reembed_store
from temporal_recall.query import search_messages

from ..cli._support import recall_async
from ..store._support import column_of
from .test_hybrid import FACTS, _Other, tell


async def test_reindex_embeds_a_store_written_without_an_embedder_then_changes_model(any_store_url: str) -> None:
    from temporal_recall.store import open_store

    store: Any = await open_store(any_store_url)
    try:
        await tell(store, 'plain', FACTS)
        assert await column_of(store, 'SELECT count(*) FROM document_vectors') == [0]
    finally:
        await store.close()

    refused = await recall_async('reindex', '--embeddings', '--store', any_store_url, env={})
    assert refused.returncode != 0 and '--embedder' in refused.stderr
    ran = await recall_async('reindex', '--embeddings', '--embedder', LOCAL_MODEL, '--store', any_store_url)
    assert ran.returncode == 0, ran.stderr
    documents = 2 * len(FACTS)  # each prompt, and each 'Noted.' (its usage differs run to run)
    assert f'embedded {documents} documents with {LOCAL_MODEL}' in ran.stdout

    store = await open_store(any_store_url)
    try:
        assert await column_of(store, 'SELECT count(*) FROM document_vectors') == [documents]
        found = await search_messages(
            store, 'delivery address for that package', conversation_id='plain', scope=None, role='user',
            mode='semantic', embedder=LOCAL_MODEL,
        )  # fmt: skip
        assert found.hits[0].excerpt == FACTS[1]
        seen: list[tuple[int, int]] = []
        other = Embedder(_Other())
        assert await reembed_store(store, other, lambda done, total: seen.append((done, total))) == documents
        assert seen[0] == (0, documents) and seen[-1] == (documents, documents)
        assert await column_of(store, 'SELECT model FROM vector_space') == ['test:other']
        assert await column_of(store, 'SELECT count(*) FROM document_vectors') == [documents]
        assert await reembed_store(store, other) == 0  # nothing left to embed
    finally:
        await store.close()
