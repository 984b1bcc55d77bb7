"""The local model of the `semantic` extra: real wordllama weights, loaded from the wheel, never downloaded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from pydantic_ai.embeddings import Embedder

from temporal_recall.embeddings import LOCAL_MODEL, WordLlamaEmbeddingModel, as_embedder
from temporal_recall.embeddings._source import model_name_of
from temporal_recall.embeddings._vectors import embed_texts, quantize


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to download (wordllama fetches through `requests`) fails the test."""
    import requests

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f'the local model tried to download: {args}')

    monkeypatch.setattr(requests, 'get', refuse)
    monkeypatch.setattr(requests.Session, 'request', refuse)


async def test_the_local_model_embeds_offline_from_the_packaged_files(no_network: None) -> None:
    embedder = as_embedder(LOCAL_MODEL)
    assert embedder is not None
    result = await embedder.embed_documents(['The parcel was shipped to my office in Berlin', 'keep it short'])
    vectors = np.asarray(result.embeddings)
    assert vectors.shape == (2, 256)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-4)
    assert (result.model_name, result.provider_name) == ('l2_supercat_256', 'wordllama')


async def test_a_paraphrase_is_nearer_than_an_unrelated_message() -> None:
    embedder = Embedder(WordLlamaEmbeddingModel())
    stored = [
        'The parcel was shipped to my office in Berlin',
        'I prefer terse replies, keep answers brief',
        'My favourite colour is green and I own two cats',
    ]
    found = await embed_texts(embedder, stored, input_type='document')
    for question, expected in (('Where was the package delivered', 0), ('keep it short please', 1)):
        query = await embed_texts(embedder, [question], input_type='query')
        assert int(np.argmax(found.vectors @ query.vectors[0])) == expected


async def test_names_and_models_agree_on_the_recorded_model_name() -> None:
    by_name, by_model = as_embedder(LOCAL_MODEL), as_embedder(WordLlamaEmbeddingModel())
    assert by_name is not None and by_model is not None
    assert model_name_of(by_name) == model_name_of(by_model) == LOCAL_MODEL
    assert as_embedder(None) is None
    assert model_name_of(Embedder('openai:text-embedding-3-small')) == 'openai:text-embedding-3-small'


async def test_int8_vectors_rank_like_the_float_ones() -> None:
    embedder = as_embedder(LOCAL_MODEL)
    assert embedder is not None
    texts = [f'message number {index} about {topic}' for index, topic in enumerate(['billing', 'travel', 'cats'] * 20)]
    found = await embed_texts(embedder, texts, input_type='document')
    components, scales = quantize(found.vectors)
    assert components.dtype == np.int8 and components.shape == (60, 256)
    exact = found.vectors @ found.vectors.T
    approximate = (components * scales[:, None]) @ found.vectors.T
    assert float(np.abs(exact - approximate).max()) < 0.01


def test_loading_leaves_no_folder_behind(tmp_path: Path) -> None:
    """The model's file layout lives only while loading: a process that leaves through `os._exit` (the
    worker, `recall`) runs no `atexit`, so nothing may wait for one. Loaded in a process of its own, whose
    temporary folder is `tmp_path`."""
    script = (
        'import os, sys; from temporal_recall.embeddings._local import _load; '
        "_load().embed(['hello']); sys.stdout.flush(); os._exit(0)"
    )
    ran = subprocess.run(
        [sys.executable, '-c', script], env={**os.environ, 'TMPDIR': str(tmp_path)}, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr
    assert list(tmp_path.iterdir()) == []
