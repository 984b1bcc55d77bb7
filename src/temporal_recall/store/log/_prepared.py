"""What an append computes before its transaction: its messages serialised, hashed and tokenized, and its
base hash and fence key checked, so a write holds its locks only for the database's part."""

from __future__ import annotations

from dataclasses import dataclass

from temporal_recall.errors import HistoryMismatch

from ..index._terms import PreparedMessage, prepare_message
from ..protocol import AppendRequest, fence_row_key
from ..sql._keys import hash_bytes

__all__ = ('Prepared', 'prepare')


@dataclass(frozen=True)
class Prepared:
    """What an append computes before its transaction: the checked base hash, the fence key, the messages."""

    request: AppendRequest
    base_hash: bytes | None
    fence_key: str | None
    messages: list[PreparedMessage]


def prepare(request: AppendRequest) -> Prepared:
    """Check and serialise `request` outside the transaction (which holds the write lock while it runs)."""
    hashes = request.content_hashes  # as many as the messages (`AppendRequest.__post_init__`)
    return Prepared(
        request=request,
        base_hash=_base_hash(request),
        fence_key=fence_row_key(request),
        messages=[
            prepare_message(
                message,
                run_id=request.run_id,
                summary=request.summary,
                known_hash=None if hashes is None else hashes[index],
            )
            for index, message in enumerate(request.messages)
        ],
    )


def _base_hash(request: AppendRequest) -> bytes | None:
    if request.base_length < 0:
        raise HistoryMismatch(f'base_length must not be negative (got {request.base_length}).')
    if request.base_length == 0:
        return None
    if request.base_hash is None:
        raise HistoryMismatch('base_hash is required when base_length is positive; resend with base_length=0.')
    try:
        return hash_bytes(request.base_hash)
    except ValueError:
        raise HistoryMismatch(f'base_hash {request.base_hash!r} is not a hex content hash.') from None
