"""What the index takes from a message: its terms, computed with the rest of what a write stores for it
before the transaction starts (`PreparedMessage`), the entry joining a membership (`Member`), and a
document's term list as stored."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pydantic_core
from numpy.typing import NDArray
from pydantic_ai.messages import ModelMessage

from temporal_recall.content import content_hash, dump_message
from temporal_recall.errors import MessageNotSerializable
from temporal_recall.text._documents import SummaryRule, analysed_documents

from ..sql._keys import hash_bytes

__all__ = (
    'DOCUMENTS_PER_ENTRY',
    'FIRST_ALLOCATED',
    'IndexTerms',
    'Member',
    'PreparedMessage',
    'decode_term_ids',
    'document_id',
    'encode_term_id_arrays',
    'encode_term_ids',
    'index_documents',
    'message_run_id',
    'prepare_message',
)


@dataclass(frozen=True, kw_only=True)
class IndexTerms:
    """What the index stores for one document: term frequencies, the BM25 length, and who spoke it."""

    frequencies: Counter[str]
    length: int
    role: str
    """`part_role` of the words: what a role filter matches. A message's documents are keyed by its
    content and their role (a role is a property of the content, as the document is)."""


DOCUMENTS_PER_ENTRY = 4
"""The most documents one message makes: one per speaker (`part_role`: user, assistant, tool, system)."""


FIRST_ALLOCATED = 2**62
"""Where the ids a document cannot derive start (its entry's id is another tenant's document): above
every derived one. `reindex` restarts their allocation here."""


def document_id(entry_key: int, index: int) -> int:
    """The id of the `index`-th document (`index_documents` order) of the entry that created it.

    Derived from the log, not allocated: a document keeps the id of its first member whichever writer
    commits first, and `reindex` gives it the same one (the ranking tie-break; docs/design/store.md, "Concurrency").
    """
    return entry_key * DOCUMENTS_PER_ENTRY + index


def index_documents(message: ModelMessage) -> tuple[IndexTerms, ...]:
    """The message's documents, one per speaker with searchable words (`searchable_texts`), in the
    order they speak; none for a summary or a message without searchable words."""
    return tuple(
        IndexTerms(frequencies=frequencies, length=length, role=role)
        for role, _, frequencies, length in analysed_documents(message)
    )


@dataclass(frozen=True, kw_only=True)
class PreparedMessage:
    """Everything a write stores for one message, computed before the transaction starts.

    Serializing and tokenizing outside the transaction keeps the write lock short and makes a
    message that cannot be stored fail before anything is touched.
    """

    message_json: str
    content_hash: bytes
    run_id: str | None
    terms: tuple[IndexTerms, ...]
    """The message's documents (`index_documents`); none when it is not indexed."""
    unindexed: bool = False
    """The application's summary rule accepted the message: stored with that mark, never indexed."""


def message_run_id(message: ModelMessage) -> str | None:
    run_id: Any = getattr(message, 'run_id', None)
    return run_id if isinstance(run_id, str) else None


def prepare_message(
    message: ModelMessage,
    *,
    run_id: str | None = None,
    summary: SummaryRule | None = None,
    known_hash: str | None = None,
) -> PreparedMessage:
    """Serialize, hash and tokenize `message`; `run_id` defaults to the one pydantic-ai stamped on it.

    `summary` is the application's own summary rule (`ConversationRecall(summary=...)`): a message it
    accepts is stored marked `unindexed`, which every later indexing of the entry (a fork, a
    reindex) respects without the rule. `known_hash`: the message's `content_hash`, when the caller
    has it (`AppendRequest.content_hashes`); a message is otherwise serialised twice, once for the
    row and once, canonically, for its hash.

    Raises:
        MessageNotSerializable: If pydantic-ai's adapter cannot dump the message.
    """
    unindexed = summary is not None and bool(summary(message))
    try:
        message_json = dump_message(message)
        digest = content_hash(message) if known_hash is None else known_hash
    except MessageNotSerializable:
        raise
    except (pydantic_core.PydanticSerializationError, ValueError, TypeError) as error:  # e.g. a lone surrogate
        raise MessageNotSerializable(
            f'A {type(message).__name__} could not be serialized for storage ({error}). Tool returns and prompts '
            'must be JSON-serializable; convert custom objects to dicts or pydantic models before returning them.'
        ) from error
    return PreparedMessage(
        message_json=message_json,
        content_hash=hash_bytes(digest),
        run_id=run_id if run_id is not None else message_run_id(message),
        terms=() if unindexed else index_documents(message),
        unindexed=unindexed,
    )


def encode_term_ids(term_ids: Iterable[int]) -> bytes:
    """Sorted term ids as delta varints: a document's term list, so its postings can be deleted by key.

    Far smaller than a secondary index on postings by document would be. A loop in Python rather than
    arrays, for the common write of a few messages (docs/benchmarks/history.md has the comparison).
    """
    out = bytearray()
    previous = 0
    for term_id in sorted(term_ids):
        delta = term_id - previous
        previous = term_id
        while delta >= 0x80:
            out.append(delta & 0x7F | 0x80)
            delta >>= 7
        out.append(delta)
    return bytes(out)


def encode_term_id_arrays(ids: NDArray[np.int64], sizes: NDArray[np.int64]) -> list[bytes]:
    """`encode_term_ids` of many documents at once, with arrays: `ids` holds each document's term ids in a
    row, `sizes` how many each has. A rebuild's batch encodes tens of thousands of documents, where a
    Python step per term would dominate."""
    owner = np.repeat(np.arange(len(sizes)), sizes)
    order = np.lexsort((ids, owner))  # By document, each document's ids ascending.
    ids = ids[order]
    starts = np.cumsum(sizes) - sizes
    deltas = ids - np.concatenate(([0], ids[:-1]))
    first = starts[sizes > 0]
    deltas[first] = ids[first]  # Each document's first id is its own delta.
    lengths = np.ones(len(deltas), dtype=np.int64)  # Bytes per value: one per 7 bits, at least one.
    rest = deltas >> 7
    while rest.any():
        lengths += rest > 0
        rest >>= 7
    ends = np.cumsum(lengths)
    out = np.empty(int(ends[-1]) if len(ends) else 0, dtype=np.uint8)
    at = ends - lengths
    for byte in range(int(lengths.max()) if len(lengths) else 0):
        has = lengths > byte
        more = np.where(lengths[has] > byte + 1, 0x80, 0)
        out[at[has] + byte] = ((deltas[has] >> (7 * byte)) & 0x7F) | more
    data = out.tobytes()
    per_document = np.bincount(owner, weights=lengths, minlength=len(sizes)).astype(np.int64)
    bounds = np.cumsum(per_document)
    return [data[end - size : end] for end, size in zip(bounds.tolist(), per_document.tolist(), strict=True)]


def decode_term_ids(data: bytes) -> list[int]:
    term_ids: list[int] = []
    value = 0
    shift = 0
    previous = 0
    for byte in data:
        value |= (byte & 0x7F) << shift
        if byte & 0x80:
            shift += 7
            continue
        previous += value
        term_ids.append(previous)
        value = 0
        shift = 0
    return term_ids


@dataclass(frozen=True, kw_only=True)
class Member:
    """An entry about to join a conversation's index membership."""

    entry_key: int
    position: int
    run_key: int | None
    content_hash: bytes
    prepared: PreparedMessage | None = None
    """Set for entries written by this transaction; otherwise the terms are read from the stored message."""
    unindexed: bool = False
    """Stored marked as a summary by the application's own rule (`entries.unindexed`): never indexed."""

    @property
    def kept_out(self) -> bool:
        """Whether the application's summary rule keeps this entry out of the index (read or prepared)."""
        return self.unindexed or (self.prepared is not None and self.prepared.unindexed)
