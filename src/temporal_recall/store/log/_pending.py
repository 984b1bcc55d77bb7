"""Requests no response separates, read from a stored history as a run holds them: as one message.

A request is stored before its model call (`capability._step_write`), so a call that failed
leaves it at the head with no answer. The next run continues from it, but pydantic-ai merges
requests no response separates into one, when it loads a history and when it sends one to the model
(`content.as_one_request`). So that run writes them, with its own request, as one message at the
position of the first, and every later run counts them as one message. `append` therefore reads a
written request against consecutive stored requests taken as one (`continues`), stores only what a
request adds to the ones at the head, and accepts an attach point counted that way (`anchor`).
More in docs/design/store.md ("store/log/_pending.py").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic_ai.messages import ModelMessage, ModelRequest

from temporal_recall.content import as_one_request, content_hash, load_message, said_parts, without_said_parts

from ..sql._keys import hash_bytes
from ..sql._session import Session
from ._rows import ChainEntry

__all__ = ('Continued', 'Requests', 'anchor', 'continues', 'requests_at', 'requests_ending_the_chain')


@dataclass(frozen=True)
class Requests:
    """Consecutive requests of a head's chain, and what they are as one request."""

    entries: tuple[ChainEntry, ...]
    """Oldest first; empty when the chain holds no request there."""
    merged_hash: bytes | None
    """The content hash of the requests as one (`None` without requests, or if pydantic-ai keeps them apart)."""
    merged_parts: tuple[str, ...]
    """What the requests say, as one (`content.said_parts`)."""
    at_head: bool
    """Whether the last of them is the head: no response followed them."""

    @classmethod
    def of(cls, entries: list[ChainEntry], requests: list[ModelRequest], *, at_head: bool) -> Requests:
        merged = as_one_request(requests) if requests else None
        return cls(
            entries=tuple(entries),
            merged_hash=None if merged is None else hash_bytes(content_hash(merged)),
            merged_parts=() if merged is None else tuple(said_parts(merged)),
            at_head=at_head,
        )


async def requests_at(session: Session, chain: Sequence[ChainEntry], position: int) -> Requests:
    """The requests of `chain` (a head's chain, oldest first) from `position` on, up to the next response."""
    entries: list[ChainEntry] = []
    requests: list[ModelRequest] = []
    for entry in chain:
        if entry.position < position:
            continue
        message = await _message(session, entry.entry_key)
        if not isinstance(message, ModelRequest):
            return Requests.of(entries, requests, at_head=False)
        entries.append(entry)
        requests.append(message)
    return Requests.of(entries, requests, at_head=True)


async def requests_ending_the_chain(
    session: Session, chain: Sequence[ChainEntry]
) -> tuple[Requests, ChainEntry | None]:
    """The requests `chain` ends with (none when its head is a response), and the message before them
    (`None` when the chain read does not reach it)."""
    entries: list[ChainEntry] = []
    requests: list[ModelRequest] = []
    for entry in reversed(chain):
        message = await _message(session, entry.entry_key)
        if not isinstance(message, ModelRequest):
            return Requests.of(entries, requests, at_head=True), entry
        entries.insert(0, entry)
        requests.insert(0, message)
    return Requests.of(entries, requests, at_head=True), None


async def _message(session: Session, entry_key: int) -> ModelMessage:
    return load_message(await session.value('SELECT message FROM entries WHERE entry_key = $1', entry_key))


def anchor(
    chain: Sequence[ChainEntry], pending: Requests, before: ChainEntry | None, base_hash: bytes, lowest: int
) -> ChainEntry | None:
    """Where a write whose base message has `base_hash` attaches, when its writer counted consecutive
    stored requests as one message, so its `base_length` is smaller than the stored one.

    Only the end of the history is considered, no lower than position `lowest` (the writer's own
    count): the head, the requests it ends with (`pending`) as one (attach after the last of them) or
    each of them, or the message before them (`before`).
    """
    head = chain[-1]
    candidates: list[tuple[bytes | None, ChainEntry]] = [(head.content_hash, head)]
    if pending.entries:
        candidates.append((pending.merged_hash, head))
        candidates.extend((entry.content_hash, entry) for entry in reversed(pending.entries))
    if before is not None:
        candidates.append((before.content_hash, before))
    return next((entry for found, entry in candidates if found == base_hash and entry.position >= lowest), None)


@dataclass(frozen=True)
class Continued:
    """A written request read against the consecutive stored requests at its position."""

    rest: ModelRequest | None
    """What the written request adds to them, stored as a request of its own after them (`None`:
    nothing, it is them as one)."""


def continues(stored: Requests, written: Sequence[ModelMessage]) -> Continued | None:
    """Whether the `written` requests, written where the `stored` ones begin, are them as one message
    (a run merged one side or both), or, when no response followed the stored ones, them and more (a
    run merged them into its own request); `None` if neither."""
    requests = [message for message in written if isinstance(message, ModelRequest)]
    merged = as_one_request(requests) if requests and len(requests) == len(written) else None
    if merged is None or stored.merged_hash is None:
        return None
    if hash_bytes(content_hash(merged)) == stored.merged_hash:
        return Continued(rest=None)
    said = said_parts(merged)
    held = len(stored.merged_parts)
    if not stored.at_head or len(said) <= held or tuple(said[:held]) != stored.merged_parts:
        return None
    return Continued(rest=without_said_parts(merged, held))
