"""Recall from workflow code: await a search without involving the model.

Runs the `temporal_recall.search` activity, so the store is only touched in activity code and the
result is recorded in history (replay reads it back instead of searching again).
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from .._renamed import deprecated_include_branches
    from ..activities._names import LOAD_HISTORY_ACTIVITY, SEARCH_ACTIVITY
    from ..errors import InvalidIdentifier, InvalidQuery, InvalidSearchParameters, non_retryable
    from ..models import HistoryRequest, LoadedHistory, SearchRequest, SearchResult
    from ..search import Role, SearchMode, parse_query

__all__ = ('DEFAULT_HEARTBEAT_TIMEOUT', 'DEFAULT_RETRY_POLICY', 'load_history', 'recall', 'refused')

DEFAULT_HEARTBEAT_TIMEOUT = timedelta(seconds=10)
"""How long the search and history activities may go unheard from before Temporal takes their worker for
dead and retries them on another: both heartbeat while they work, so this bounds the wait a killed worker
costs (its attempt is retried about a second after this), not how long a slow store may take, which
`start_to_close_timeout` does."""

DEFAULT_RETRY_POLICY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    non_retryable_error_types=['InvalidQuery', 'InvalidSearchParameters', 'PayloadTooLarge', 'UnknownConversation'],
)
"""Store outages are retried with backoff until the timeout; refused requests are not retried."""


@contextlib.contextmanager
def refused() -> Generator[None]:
    """Turn a refused id or query into a non-retryable `ApplicationError` that fails the workflow.

    Raised as is, our error would be an ordinary exception in workflow code, which fails the
    workflow *task*, and Temporal retries a workflow task forever: the workflow would hang instead
    of reporting input that can never become valid. The error's class name is the `type`, as for
    the activities' refusals, and the original is the cause.
    """
    try:
        yield
    except (InvalidIdentifier, InvalidQuery, InvalidSearchParameters) as error:
        raise non_retryable(error) from error


async def recall(
    query: str,
    *,
    conversation_id: str | None,
    scope: str | None = None,
    all_conversations: bool = False,
    run_id: str | None = None,
    limit: int = 10,
    context_lines: int = 0,
    role: Role | None = None,
    include_superseded: bool = False,
    include_branches: bool | None = None,
    mode: SearchMode | None = None,
    agent: str | None = None,
    start_to_close_timeout: timedelta = timedelta(seconds=30),
    schedule_to_close_timeout: timedelta | None = timedelta(minutes=5),
    heartbeat_timeout: timedelta | None = DEFAULT_HEARTBEAT_TIMEOUT,
    retry_policy: RetryPolicy = DEFAULT_RETRY_POLICY,
) -> SearchResult:
    """Search a conversation's persisted history from workflow code.

    `conversation_id` and `scope` must come from the workflow's own input or state. A conversation
    that does not exist in `scope` yields an empty result with a `message`, exactly as one that
    belongs to another scope does. `role` keeps only what the user, the assistant, a tool or the
    system said; `limit` counts occurrences (see `SearchRequest.limit`). A conversation is searched with
    everything it stored, on its head and on every branch it left; `include_superseded` also searches
    what was superseded inside one agent run (an answer a retried model activity replaced), which the
    model never sees. `include_branches` is its deprecated old name. `mode` ranks by words (`bm25`),
    meaning (`semantic`) or both (`hybrid`, the default where there is an embedder); the query is embedded
    in the search activity, never here, with the embedder of `agent`'s `ConversationRecall` (the name of
    an agent the worker runs, from the workflow's own input), else the worker's `RecallPlugin`'s, else
    the one its store was opened with; a search asked for meaning without any of them uses the model the
    store's vectors were made with. The activity heartbeats: a worker killed while it runs is noticed
    within `heartbeat_timeout` and the search retried elsewhere.

    Raises:
        ApplicationError: non-retryable, `type` `InvalidIdentifier`, `InvalidQuery` or
            `InvalidSearchParameters`, when an id or the query is not usable text or the role is
            unknown (see `refused`); the activity's own refusals arrive as an `ActivityError` whose
            cause has the same `type`s.
    """
    with refused():
        request = SearchRequest(
            query=query,
            conversation_id=conversation_id,
            scope=scope,
            all_conversations=all_conversations,
            run_id=run_id,
            limit=limit,
            context_lines=context_lines,
            role=role,
            include_superseded=include_superseded or deprecated_include_branches('recall', include_branches),
            mode=mode,
            agent=agent,
        )
    _refuse_unsearchable(request.query)
    return await workflow.execute_activity(
        SEARCH_ACTIVITY,
        request,
        result_type=SearchResult,
        start_to_close_timeout=start_to_close_timeout,
        schedule_to_close_timeout=schedule_to_close_timeout,
        heartbeat_timeout=heartbeat_timeout,
        retry_policy=retry_policy,
    )


UNSEARCHABLE_QUERY_PATCH = 'temporal_recall.recall-refuses-unsearchable-queries'
"""Marks a workflow whose `recall()` refused a query with no searchable terms without scheduling a search."""


def _refuse_unsearchable(query: str) -> None:
    """Refuse a query the search activity would refuse anyway (punctuation only, no terms), before scheduling it.

    `parse_query` is pure, so this is deterministic. Only an unusable query reaches `workflow.patched`:
    a history recorded before this scheduled the search and failed in it, and replays that way.
    """
    try:
        parse_query(query)
    except InvalidQuery as error:
        if workflow.patched(UNSEARCHABLE_QUERY_PATCH):
            raise non_retryable(error) from error


async def load_history(
    conversation_id: str,
    *,
    scope: str | None = None,
    limit: int | None = None,
    max_bytes: int | None = None,
    start_to_close_timeout: timedelta = timedelta(seconds=30),
    heartbeat_timeout: timedelta | None = DEFAULT_HEARTBEAT_TIMEOUT,
    retry_policy: RetryPolicy = DEFAULT_RETRY_POLICY,
) -> LoadedHistory:
    """The current branch of a stored conversation, for a workflow to continue it.

    With `max_bytes`, only its newest whole turns that fit: then `LoadedHistory.window` says where
    they start, and the run must get it as `RecallDeps(history_window=...)` so its messages are
    stored after the conversation's, not as a rewrite of it. Without, a branch too large for one
    payload fails non-retryably as `PayloadTooLarge`. The activity heartbeats: a worker killed while it
    runs is noticed within `heartbeat_timeout`, while a large history still has `start_to_close_timeout`.

    Raises:
        ApplicationError: non-retryable, `type` `InvalidIdentifier`, for an id that is not usable text.
    """
    with refused():
        request = HistoryRequest(conversation_id=conversation_id, scope=scope, limit=limit, max_bytes=max_bytes)
    return await workflow.execute_activity(
        LOAD_HISTORY_ACTIVITY,
        request,
        result_type=LoadedHistory,
        start_to_close_timeout=start_to_close_timeout,
        heartbeat_timeout=heartbeat_timeout,
        retry_policy=retry_policy,
    )
