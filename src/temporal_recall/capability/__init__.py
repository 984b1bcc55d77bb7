"""The capability that makes an agent's conversation durable in the store and searchable by its model.

- `_conversation_recall`: `ConversationRecall`, the pydantic-ai capability an agent is given. It
  decides, from workflow code, what each step boundary still has to write (`store_step`), and gives
  the model its search tool.
- `_persisting_model`: the model wrapper, whose request writes its own step inside the model-request
  activity, so most steps cost no activity of their own; `_step_write` is that write, `_marker` what
  the stored response carries back to the workflow, `_activity_errors` how the write's failures
  cross the activity boundary.
- `_delta`: which messages of a run the store already holds, so each write carries only the new
  ones, keyed for idempotency.
- `_repeated_prompts`: a prompt left unanswered and said again by the next run is sent to the model once.

Agents are defined at module level and imported into Temporal's workflow sandbox, so nothing here
imports a store backend at import time: the store is reached through `StoreProvider` in activity
code only.
"""

from __future__ import annotations

from ._conversation_recall import ConversationRecall, ScopeResolver

__all__ = ('ConversationRecall', 'ScopeResolver')
