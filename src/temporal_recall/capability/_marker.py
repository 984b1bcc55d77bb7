"""The step marker: what a response stored by its own activity carries back to the workflow.

The model-request activity puts the marker in the response's `metadata`; the capability's
workflow-side hook takes it off again before pydantic-ai records the response. Being part of the
activity's result, it is in the workflow's history, so replay decides as the first run did, and a
history recorded before in-activity writes has none and takes the workflow-side path.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import ModelResponse

from ..content import CANONICAL_FORM

__all__ = ('MARKER_KEY', 'Marker', 'ViewCheck', 'marked', 'take_marker', 'view_digest')

MARKER_KEY = 'temporal_recall.persisted'
"""Key in `ModelResponse.metadata` saying the response was stored by the step's own activity."""


@dataclass(frozen=True)
class Marker:
    content_hash: str
    """The content hash of the response as stored."""
    metadata_was_none: bool
    """Whether the response's `metadata` was `None` before the marker was added (restored on removal)."""
    view: ViewCheck | None = None
    """What the step wrote before the response (`None` in histories recorded before it was added)."""
    form: int = 1
    """The canonical form its hashes were made in (`content.CANONICAL_FORM`); 1 in histories recorded before form 2."""


@dataclass(frozen=True)
class ViewCheck:
    """What a step's write put before its response, for the workflow to compare with the agent's history.

    Inside an activity the wrapper sees the messages as pydantic-ai prepared them for the model:
    consecutive requests merged into one, a mid-history system prompt rendered as `<system>` user
    text by a model without inline system prompts. The store checked only the message it attached
    after (`start`), so the write matches the agent's history when that history has `length`
    messages before the response and `digest` over its messages from `start` on.
    """

    length: int
    start: int
    digest: str

    def matches(self, hashes: Sequence[str]) -> bool:
        return len(hashes) == self.length and view_digest(hashes[self.start :]) == self.digest


def view_digest(hashes: Sequence[str]) -> str:
    """One hash for a sequence of messages' content hashes."""
    return hashlib.sha256('\n'.join(hashes).encode()).hexdigest()


def marked(metadata: dict[str, Any] | None, stored_hash: str, view: ViewCheck) -> dict[str, Any]:
    """`metadata` with the marker of a response stored under `stored_hash` after `view`."""
    check = {'length': view.length, 'start': view.start, 'digest': view.digest}
    marker = {'hash': stored_hash, 'metadata_was_none': metadata is None, 'view': check, 'form': CANONICAL_FORM}
    return {**(metadata or {}), MARKER_KEY: marker}


def take_marker(response: ModelResponse) -> Marker | None:
    """Remove the marker from `response` and return it (`None` if the response has none)."""
    metadata = response.metadata
    if not metadata or MARKER_KEY not in metadata:
        return None
    raw: Any = metadata[MARKER_KEY]
    rest = {key: value for key, value in metadata.items() if key != MARKER_KEY}
    was_none = bool(raw.get('metadata_was_none')) if isinstance(raw, dict) else False
    response.metadata = None if was_none and not rest else rest
    stored = raw.get('hash') if isinstance(raw, dict) else None
    view: Any = raw.get('view') if isinstance(raw, dict) else None
    if not stored:
        return None
    check = (
        ViewCheck(length=int(view['length']), start=int(view['start']), digest=str(view['digest']))
        if isinstance(view, dict)
        else None
    )
    form = raw.get('form', 1) if isinstance(raw, dict) else 1
    return Marker(content_hash=str(stored), metadata_was_none=was_none, view=check, form=int(form))
