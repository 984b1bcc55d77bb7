"""Recall by meaning: the embedders a conversation's documents and a search's query are embedded with.

Any pydantic-ai embedder works (`pydantic_ai.embeddings`: OpenAI, Cohere, Google, Voyage, Bedrock,
sentence-transformers); `LOCAL_MODEL` names the offline model of the `semantic` extra
(`WordLlamaEmbeddingModel`). Embedding runs in activities only: where a step is written, and inside
the search activity. docs/design/semantic.md says how vectors are stored and searched.
"""

from ._local import LOCAL_MODEL, WordLlamaEmbeddingModel
from ._source import EmbedderSource, as_embedder

__all__ = ('LOCAL_MODEL', 'EmbedderSource', 'WordLlamaEmbeddingModel', 'as_embedder')
