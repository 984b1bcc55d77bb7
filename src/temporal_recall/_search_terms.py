"""The words a search request is made of, as plain `Literal`s: who spoke, and how a search ranks.

Kept apart from `temporal_recall.search`, which defines them for the library (`search.Role`,
`search.SearchMode` are these), so that `recall` can name them in its options without importing
pydantic and the search package before it has parsed its arguments.
"""

from __future__ import annotations

from typing import Literal

__all__ = ('Role', 'SearchMode')

Role = Literal['user', 'assistant', 'tool', 'system']
"""Who a reader would say spoke a message (`message_role`): the user (prompts, speech), the assistant
(text, tool calls, its own speech), a tool (results and retry feedback), or the system (prompts)."""

SearchMode = Literal['hybrid', 'bm25', 'semantic']
"""How a search ranks: by words (`bm25`), by meaning (`semantic`: the nearest vectors), or both fused
(`hybrid`). Meaning needs an embedder; without one a search is `bm25`."""
