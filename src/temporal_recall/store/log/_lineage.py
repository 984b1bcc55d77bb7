"""Revisions an append mints, which say which run's appends the conversation changed by since when.

pydantic-ai's cycle is load → run → `save(result)`, and the save must carry the revision it loaded.
`ConversationRecall` appends each step while the run goes on, and every append must change the
revision (a concurrent `save` from the revision before it has to conflict). So the run's own
appends would make its own save conflict. A revision an append mints therefore names the run that
wrote it and the revision its run's appends started from: `{uuid7}:{run}:{base}:{length}`, where
`run` and `base` are short digests of the run id and of that earlier revision, and `length` is how
many messages the conversation held at it. The next append by the same run keeps `base` and
`length`; any other write (another run's append, a save, a branch) starts anew or mints a plain
UUID. A save whose revision is `base` and whose run is `run` then knows that nothing but its own
run changed the conversation since it was loaded (`own_appends`), and anything else still conflicts.

Revisions stay opaque to callers, who compare them for equality only; stores written before this
module hold plain UUIDs, which simply carry no lineage.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ._ids import new_id

__all__ = ('Lineage', 'appended_revision', 'own_appends')

_SEPARATOR = ':'
_TAG_LENGTH = 16


def _tag(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:_TAG_LENGTH]


@dataclass(frozen=True)
class Lineage:
    """Where a run's appends started: the digest of the revision before them, and the messages held then."""

    run: str
    base: str
    length: int


def _lineage(revision: str | None) -> Lineage | None:
    parts = (revision or '').split(_SEPARATOR)
    if len(parts) != 4 or not parts[3].isdigit():
        return None
    return Lineage(run=parts[1], base=parts[2], length=int(parts[3]))


def appended_revision(previous: str | None, length: int, run_id: str | None) -> str:
    """The revision an append by `run_id` mints over `previous` (`None`: it creates the conversation),
    which held `length` messages."""
    if run_id is None:
        return new_id()
    run = _tag(run_id)
    earlier = _lineage(previous)
    lineage = earlier if earlier is not None and earlier.run == run else Lineage(run, _tag(previous or ''), length)
    return _SEPARATOR.join((new_id(), lineage.run, lineage.base, str(lineage.length)))


def own_appends(current: str, expected: str | None, run_id: str | None) -> int | None:
    """How many messages the conversation held at `expected`, if `current` differs from it only by
    appends of `run_id`; else `None` (someone else changed it)."""
    lineage = _lineage(current)
    if run_id is None or lineage is None or lineage.run != _tag(run_id) or lineage.base != _tag(expected or ''):
        return None
    return lineage.length
