"""The activity names temporal-recall registers: a public, pinned compatibility contract.

Workflow histories record these strings. Renaming one makes every running workflow that scheduled
it fail to replay, so they never change; a new behaviour gets a new name beside the old one.
`tests/replay/test_activity_names.py` pins the full set.
"""

from __future__ import annotations

__all__ = ('LOAD_HISTORY_ACTIVITY', 'SEARCH_ACTIVITY', 'STORE_STEP_OPERATION')

SEARCH_ACTIVITY = 'temporal_recall.search'
"""BM25 search over a conversation's (or a scope's) persisted history."""

LOAD_HISTORY_ACTIVITY = 'temporal_recall.load_history'
"""The current branch of a stored conversation, for a workflow to continue it."""

STORE_STEP_OPERATION = 'store_step'
"""The persistence capability's durable operation; pydantic-ai registers it as the activity
`agent__{agent name}__capability__{capability id}__store_step`."""
