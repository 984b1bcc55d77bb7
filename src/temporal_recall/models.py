"""Everything that crosses a Temporal boundary, as versionable pydantic models.

They are recorded in workflow histories, so they are compatibility data: fields are only added, always
with a default, never renamed or removed. Ids, queries and search filters are checked here, once, by the
annotated types of `_validation`, so every interface refuses a bad value from the constructor with the
product's own error (`InvalidIdentifier`, `InvalidQuery`, `InvalidSearchParameters`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic_ai.messages import ModelMessage
from pydantic_ai.usage import RunUsage

from ._renamed import renamed_names, warn_renamed_argument
from ._search_terms import Arm, SearchMode
from ._validation import Identifier, ModeFilter, QueryText, RoleFilter

__all__ = (
    'MAX_QUERY_ECHO_CHARS',
    'ContextMessage',
    'ConversationClosed',
    'ConversationInput',
    'HistoryRequest',
    'HistoryWindow',
    'LoadedHistory',
    'RecallDeps',
    'RunPromptInput',
    'RunPromptOutput',
    'SearchHit',
    'SearchRequest',
    'SearchResult',
    'StepDelta',
    'StepWritten',
    'TurnInput',
    'TurnOutput',
)

_FROZEN = ConfigDict(frozen=True)


class StepDelta(BaseModel):
    """One step boundary's write: the messages the store lacks and where they attach."""

    model_config = _FROZEN

    conversation_id: Identifier
    scope: Identifier | None = None
    idempotency_key: str
    base_length: int = Field(default=0, ge=0)
    base_hash: str | None = None
    messages: list[ModelMessage] = Field(default_factory=list[ModelMessage])
    run_id: Identifier | None = None
    usage: RunUsage | None = None


class StepWritten(BaseModel):
    """What a step write did. `attached=False` asks the writer to resend the whole history."""

    model_config = _FROZEN

    attached: bool = True
    head_id: str | None = None
    length: int = 0
    stored: int = 0
    replayed: bool = False


class SearchRequest(BaseModel):
    """A recall query. The scope fields must come from trusted workflow state, never from a model."""

    model_config = _FROZEN

    query: QueryText
    conversation_id: Identifier | None = None
    """The conversation to search; `None` only together with `all_conversations=True`."""
    scope: Identifier | None = None
    """The tenant scope the conversation must have been stored with (exact match, `None` included)."""
    all_conversations: bool = False
    """Search every conversation of `scope`: for stores isolated to one principal."""
    run_id: Identifier | None = None
    exclude_run_id: Identifier | None = None
    """Leave out what was said in this run: the model's tool passes its own run, whose messages are
    already in front of the model."""
    limit: int = 10
    """How many hits, at most. A hit is one occurrence: words said at several positions of a
    conversation (a repeated prompt, the same answer in two runs) are a hit at each position, all
    with the score of those words, earliest position first, and each counts towards `limit`.
    Copies of one message (re-sent by a later run, re-instantiated by Temporal, shared by a fork,
    or repeated on a branch the conversation moved away from) are one occurrence, not several."""
    context_lines: int = 0
    k1: float = 1.5
    b: float = 0.75
    role: RoleFilter | None = None
    """Only messages of this role (`user`, `assistant`, `tool` or `system`), chosen inside the query:
    the best `limit` hits of that role, scored exactly as without the filter. It only narrows what
    the scope and conversation already allow."""
    include_superseded: bool = False
    """Also search what was superseded inside one agent run: a model answer that a later attempt of the
    same request replaced (a Temporal activity retry), and what only that answer led to. By default a
    search sees everything else the conversation stored, on its current history and on every branch it
    left (compacted, windowed or rewritten turns included); the model's own recall tool never sets this."""
    include_branches: bool = False
    """Deprecated: the old name of `include_superseded` (kept so histories that carry it still decode)."""
    mode: ModeFilter | None = None
    """`bm25` (words), `semantic` (meaning: the nearest vectors) or `hybrid` (both, fused); `None`: hybrid
    where the search has an embedder, else bm25. Meaning asked for without one embeds the query with the
    model the store's vectors were made with, and is refused when the store has none."""
    agent: Identifier | None = None
    """The agent whose search this is (the workflow's own, never the model's or a caller's choice): the search
    activity embeds the query with that agent's `ConversationRecall(embedder=...)` when the worker runs it,
    before the worker's embedder. It only picks the embedder; it never widens what is searched."""

    @model_validator(mode='before')
    @classmethod
    def _renamed(cls, data: Any, info: ValidationInfo) -> Any:
        """Take `include_branches` as `include_superseded`; a caller's own argument warns, a payload decoded
        from a history (JSON, as Temporal's converters decode) does not."""
        if isinstance(data, dict) and 'include_branches' in data:
            if info.mode == 'python':
                warn_renamed_argument('SearchRequest', 'include_branches', 'include_superseded', stacklevel=6)
            if data['include_branches'] is True and not data.get('include_superseded'):
                data = {**data, 'include_superseded': True}
        return data


MAX_QUERY_ECHO_CHARS = 200
"""Characters of the query text repeated back in a result."""


class ContextMessage(BaseModel):
    """A message next to a hit, shown so the hit can be read in context."""

    model_config = _FROZEN

    position: int
    role: str
    excerpt: str = ''


class SearchHit(BaseModel):
    """One matching message and where to find it again."""

    model_config = _FROZEN

    score: float
    conversation_id: str
    run_id: str | None = None
    entry_id: str
    position: int
    role: str
    timestamp: datetime | None = None
    excerpt: str = ''
    context: list[ContextMessage] = Field(default_factory=list[ContextMessage])
    """Neighbouring messages in position order, not repeating ones shown as a hit or as an earlier
    hit's context."""
    found_by: list[Arm] = Field(default_factory=lambda: ['bm25'])
    """Which rankings found it: its words (`bm25`), its meaning (`semantic`), or both in a hybrid search."""


class SearchResult(BaseModel):
    """Everything one search found, best hit first."""

    model_config = _FROZEN

    query: str
    """The query text as asked; a longer one is cut to `MAX_QUERY_ECHO_CHARS`, its last character `…`."""
    hits: list[SearchHit] = Field(default_factory=list[SearchHit])
    searched_documents: int = 0
    """How many indexed messages the search could see."""
    truncated_query: bool = False
    """Whether only the query's first `MAX_QUERY_TERMS` distinct terms were searched."""
    message: str | None = None
    """Why nothing could be searched (for example, no conversation to search), for the reader."""
    mode: SearchMode = 'bm25'
    """How the hits were ranked (`SearchRequest.mode`, resolved)."""

    @field_validator('query')
    @classmethod
    def _clip_query(cls, value: str) -> str:
        """The one place a query is cut for a result: callers pass it whole."""
        if len(value) <= MAX_QUERY_ECHO_CHARS:
            return value
        return value[: MAX_QUERY_ECHO_CHARS - 1] + '…'


DEFAULT_MAX_PROMPT_BYTES = 512 * 1024
"""The largest prompt the shipped workflows take by default (UTF-8 bytes): Temporal warns about payloads
from 512 KiB and refuses them from 2 MB, and each model request carries the prompt with the history."""


DEFAULT_HISTORY_BYTES = 1_000_000
"""How much stored history the shipped workflows load, at most (serialized bytes): the newest whole
turns, leaving room in a model request's 2 MB payload for the prompt and the run's own messages."""


class HistoryWindow(BaseModel):
    """Where a history loaded without its oldest turns starts in the stored conversation.

    Passed on in `RecallDeps.history_window`, it lets persistence attach the run's messages after the
    stored ones: without it, a history starting mid-conversation would be stored as a rewrite.
    """

    model_config = _FROZEN

    offset: int = Field(ge=1)
    """How many stored messages come before the first loaded one."""
    base_hash: str
    """The content hash of the stored message just before the first loaded one."""


class HistoryRequest(BaseModel):
    model_config = _FROZEN

    conversation_id: Identifier
    scope: Identifier | None = None
    limit: int | None = Field(default=None, ge=0)
    max_bytes: int | None = Field(default=None, ge=1)
    """Load only the newest whole turns that fit in this many serialized bytes (`LoadedHistory.window`
    then says where they start); `None` loads the whole branch, or fails as too large for a payload."""


class LoadedHistory(BaseModel):
    model_config = _FROZEN

    conversation_id: str
    exists: bool = False
    messages: list[ModelMessage] = Field(default_factory=list[ModelMessage])
    head_id: str | None = None
    length: int = 0
    """How many messages were loaded."""
    window: HistoryWindow | None = None
    """Set when older turns were left out to fit `HistoryRequest.max_bytes` (they stay stored and
    searchable): pass it to the run as `RecallDeps(history_window=...)`."""


class RunPromptInput(BaseModel):
    """Input of `RunPromptWorkflow`: one agent run in a named conversation."""

    model_config = _FROZEN

    prompt: str
    conversation_id: Identifier
    scope: Identifier | None = None
    agent: str | None = None
    """The registered agent's name; defaults to the worker's first agent."""
    continue_history: bool = True
    """Send the stored conversation to the model as `message_history`."""
    create: bool = True
    """Start the conversation if the store does not have it; `False` fails with `UnknownConversation`."""
    request_limit: int | None = Field(default=50, ge=1)
    """Most model requests the run may make (pydantic-ai's `UsageLimits.request_limit`); `None` lifts it."""
    max_prompt_bytes: int = Field(default=DEFAULT_MAX_PROMPT_BYTES, ge=1)
    """A longer prompt (UTF-8 bytes) fails the workflow before anything runs; raise it when the message
    codec keeps large payloads in the store."""


class RunPromptOutput(BaseModel):
    model_config = _FROZEN

    output: str
    conversation_id: str
    run_id: str
    new_messages: int = 0


class ConversationInput(BaseModel):
    """Input of `ConversationWorkflow`; also what it carries across continue-as-new."""

    model_config = _FROZEN

    conversation_id: Identifier
    scope: Identifier | None = None
    agent: str | None = None
    turns_per_run: int = Field(default=25, ge=1)
    """Continue-as-new after this many turns (or earlier, when Temporal suggests it)."""
    turns_completed: int = 0
    """Turns answered by earlier runs of the chain; carried across continue-as-new."""
    idle_timeout_seconds: float | None = Field(default=None, ge=0)
    """Finish after this long without a turn (a turn in progress is not idle); `None` or 0 waits until
    `close` is called."""
    max_prompt_bytes: int = Field(default=DEFAULT_MAX_PROMPT_BYTES, ge=1)
    """A longer prompt (UTF-8 bytes) is rejected by the `send` Update's validator, before it reaches the
    history; raise it when the message codec keeps large payloads in the store."""


class TurnInput(BaseModel):
    model_config = _FROZEN

    prompt: str


class TurnOutput(BaseModel):
    model_config = _FROZEN

    output: str
    turn: int
    """1-based number of this turn across the whole continue-as-new chain."""
    run_id: str


class RecallDeps(BaseModel):
    """Run dependencies temporal-recall's workflows pass to an agent.

    Carries the tenant scope from the workflow input (trusted) to the persistence capability and
    the recall tool, which read it inside activities. Agents run by the shipped workflows use this
    type (or a subclass) as their `deps_type`.
    """

    model_config = _FROZEN

    scope: Identifier | None = None
    history_window: HistoryWindow | None = None
    """Where the run's `message_history` starts in the stored conversation, when it was loaded
    without its oldest turns (`LoadedHistory.window`); `None` when it starts at the beginning."""


class ConversationClosed(BaseModel):
    """What `ConversationWorkflow` returns when it is closed."""

    model_config = _FROZEN

    conversation_id: str
    turns: int


__getattr__ = renamed_names(__name__, {'ConversationSummary': 'ConversationClosed'}, lambda new: globals()[new])
"""The names renamed in this release, for one more release: each access warns."""
