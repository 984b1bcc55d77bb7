"""What embedding a write asks of a store: which documents lack a vector, and a place to put vectors.

Declared here, below the store, so that `embeddings` never imports the store it serves: the store's
`VectorIndex` extends `VectorWrites` with the search's read, and an `AppendRequest` is a `StepDocuments`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, TypeAlias

from pydantic_ai.messages import ModelMessage

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from ..text._documents import SummaryRule

__all__ = ('DocumentKey', 'Fenced', 'StepDocuments', 'VectorWrites')

DocumentKey: TypeAlias = tuple[str, str]
"""`(content_hash, role)`: a document as the index and its vector are keyed within a tenant."""


class VectorWrites(Protocol):
    """The write half of a store's vectors (`store.protocol.VectorIndex`)."""

    async def vectors_missing(
        self, scope: str | None, keys: Sequence[DocumentKey]
    ) -> tuple[tuple[str, int] | None, list[DocumentKey]]:
        """The store's vector space `(model, dimensions)` (`None` before the first vector), and which of
        `keys` (`(content_hash, role)`) the scope's tenant holds no vector for, in `keys` order."""
        ...

    async def add_vectors(
        self,
        scope: str | None,
        model: str,
        components: NDArray[np.int8],
        scales: NDArray[np.float32],
        keys: Sequence[DocumentKey],
    ) -> None:
        """Store a vector (int8 `components` row, `scales` entry) per key in one transaction; one already
        stored is kept. Raises `EmbeddingMismatch` when the store's vectors are another model's."""
        ...


class StepDocuments(Protocol):
    """What embedding reads of a step's write (`store.protocol.AppendRequest`): its messages and their tenant."""

    @property
    def scope(self) -> str | None: ...

    @property
    def messages(self) -> Sequence[ModelMessage]: ...

    @property
    def summary(self) -> SummaryRule | None:
        """A message this rule accepts is never indexed, so never embedded."""
        ...

    @property
    def content_hashes(self) -> Sequence[str] | None:
        """Each message's content hash when the caller computed them, else `None`."""
        ...


class Fenced(Protocol):
    """What embedding reads of a step write's result (`store.protocol.AppendResult`)."""

    @property
    def fenced(self) -> bool:
        """A later attempt had already written: nothing was stored, so no vector is either."""
        ...
