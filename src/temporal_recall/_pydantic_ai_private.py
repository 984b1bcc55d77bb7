"""Every name this project takes from pydantic-ai's private modules, in one place.

pydantic-ai 2.78 offers no public way to do these, and a private name can move in any release. Kept
here so a move breaks one import, and `tests/test_pydantic_ai_private.py` names each symbol and says
which of ours needs it.
"""

from __future__ import annotations

from pydantic_ai._agent_graph import (
    _apply_tool_defs_to_call_parts as stamp_tool_call_parts,  # pyright: ignore[reportPrivateUsage]
)
from pydantic_ai._conversation_marks import mark_stored
from pydantic_ai._run_context import get_current_run_context
from pydantic_ai.messages import (
    _merge_consecutive_messages as merge_consecutive_messages,  # pyright: ignore[reportPrivateUsage]
)

__all__ = ('get_current_run_context', 'mark_stored', 'merge_consecutive_messages', 'stamp_tool_call_parts')
