"""The words a search is made of, as plain `Literal`s: who spoke, how a search ranks, which ranking found a hit.

They sit below `models` and `search` (which re-export them) so that `recall` can name them in its
options without importing pydantic before it has parsed its arguments.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ('ROLES', 'SEARCH_MODES', 'Arm', 'Role', 'SearchMode')

Role = Literal['user', 'assistant', 'tool', 'system']
"""Who a reader would say spoke a message (`message_role`): the user (prompts, speech), the assistant
(text, tool calls, its own speech), a tool (results and retry feedback), or the system (prompts)."""

SearchMode = Literal['hybrid', 'bm25', 'semantic']
"""How a search ranks: by words (`bm25`), by meaning (`semantic`: the nearest vectors), or both fused
(`hybrid`). Meaning needs an embedder; without one a search is `bm25`."""

Arm = Literal['bm25', 'semantic']
"""Which ranking found a hit: the words, or the meaning."""

ROLES: tuple[Role, ...] = get_args(Role)

SEARCH_MODES: tuple[SearchMode, ...] = get_args(SearchMode)
