"""Embedding texts through pydantic-ai, and the compact form vectors are stored in.

A vector is stored as int8 components with one float scale (`quantize`): unit length first, then each
component divided by `max(|component|) / 127` and rounded, which ranks like the float vector at a
quarter of its size (docs/design/semantic.md, "Storage", gives the rounding error).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from pydantic_ai.embeddings import Embedder
from pydantic_ai.embeddings.result import EmbedInputType
from pydantic_ai.exceptions import UserError

from ..errors import ConfigurationError, EmbeddingUnavailable, RecallError
from ._source import model_name_of

__all__ = ('Embedded', 'embed_texts', 'quantize', 'unit')


@dataclass(frozen=True)
class Embedded:
    """Unit-length float32 vectors, one row per text, and the model (`model_name_of`) that made them."""

    model: str
    vectors: NDArray[np.float32]

    @property
    def dimensions(self) -> int:
        return int(self.vectors.shape[1])


def unit(vectors: NDArray[np.floating]) -> NDArray[np.float32]:
    """Each row scaled to length 1 (a zero row stays zero)."""
    rows = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)


def quantize(vectors: NDArray[np.float32]) -> tuple[NDArray[np.int8], NDArray[np.float32]]:
    """Unit rows as int8 components and a scale each: `row ≈ components * scale`."""
    rows = unit(vectors)
    peaks = np.abs(rows).max(axis=1) if rows.shape[1] else np.zeros(len(rows), dtype=np.float32)
    scales = np.where(peaks > 0, peaks / 127, 1.0).astype(np.float32)
    components = np.rint(rows / scales[:, None]).clip(-127, 127).astype(np.int8)
    return components, scales


async def embed_texts(embedder: Embedder, texts: Sequence[str], *, input_type: EmbedInputType) -> Embedded:
    """Embed `texts` (documents or a query); unit vectors in input order.

    Raises:
        EmbeddingUnavailable: the model failed (a provider error, a network failure, a model that cannot
            load) or answered with the wrong number of vectors. Retryable: inside an activity Temporal
            retries it, and nothing was written for these texts.
        ConfigurationError: the embedder cannot work as configured (the local model without its extra, a
            provider whose package is not installed, an unknown model name): not retryable.
    """
    name = model_name_of(embedder)
    try:
        result = await embedder.embed(list(texts), input_type=input_type)
    except RecallError:
        raise
    except (ImportError, UserError) as error:  # a missing provider package, an unknown model name: no retry helps
        raise ConfigurationError(f'The embedding model {name!r} cannot be used: {str(error)[:300]}') from error
    except Exception as error:
        raise EmbeddingUnavailable(
            f'The embedding model {name!r} failed to embed {len(texts)} {input_type}(s): '
            f'{type(error).__name__}: {str(error)[:300]}. Check the provider (its key, its quota, the network); '
            'a write retried by Temporal stores nothing until the model answers.'
        ) from error
    vectors = np.asarray(result.embeddings, dtype=np.float32)
    if len(texts) and (vectors.ndim != 2 or len(vectors) != len(texts) or not vectors.shape[1]):
        raise EmbeddingUnavailable(
            f'The embedding model {name!r} answered {len(result.embeddings)} vectors for {len(texts)} texts; '
            'expected one non-empty vector per text.'
        )
    return Embedded(model=name, vectors=unit(vectors.reshape(len(texts), -1)))
