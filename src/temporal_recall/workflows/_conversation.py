"""A long-lived conversation: user turns arrive as Updates, and the workflow continues-as-new.

Each turn is one agent run. Turns are answered one at a time, in the order they were accepted.
After `turns_per_run` turns (or when Temporal suggests it), the workflow waits for a quiet moment,
no turn in flight, and continues-as-new carrying only the conversation's identity: the new run
loads the history from the store, so no workflow run's history grows without bound and no message
list ever rides in `continue_as_new` arguments.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic_ai.messages import ModelMessage, repair_messages

    from ..errors import InvalidSearchParameters
    from ..models import (
        ConversationClosed,
        ConversationInput,
        HistoryWindow,
        RecallDeps,
        SearchRequest,
        SearchResult,
        TurnInput,
        TurnOutput,
    )
    from ..search import BM25Parameters, SearchOptions, parse_query
    from ._agents import registered_name
    from ._recall import load_history, recall, refused
    from ._run_prompt import agent_for, history_budget, require_prompt

__all__ = ('ConversationWorkflow',)

IDLE_AFTER_TURNS = 'temporal-recall-idle-after-turns'
"""Patch marker: the idle timeout counts from the last answered turn, never through one in progress.
Before it, a turn still running when the timeout fired was answered, but the conversation closed."""

RELOAD_AFTER_FAILED_TURN = 'temporal-recall-reload-after-failed-turn'
"""Patch marker: the turn after a failed one starts from the stored conversation, which holds the failed
turn's prompt (and the tool results it got), so the next prompt follows it on the head. Before it, the
run kept its history from before the failed turn, and the next prompt left the failed one as a branch."""


@workflow.defn(name='temporal_recall.Conversation')
class ConversationWorkflow:
    @workflow.init
    def __init__(self, input: ConversationInput) -> None:
        # Set here rather than in `run`: an Update delivered with the first task of a run (common
        # right after continue-as-new) is handled before `run` starts.
        self._input = input
        self._history: list[ModelMessage] | None = None
        self._window: HistoryWindow | None = None
        self._turn_lock = asyncio.Lock()
        self._turns_total = input.turns_completed
        self._turns_this_run = 0
        self._sends_this_run = 0
        """Sends accepted by this run and answered or waiting for their turn, not those that failed
        (counted by the handler, which runs on replay too; a validator must not change state)."""
        self._closing = False

    @workflow.run
    async def run(self, input: ConversationInput) -> ConversationClosed:
        timeout = timedelta(seconds=input.idle_timeout_seconds) if input.idle_timeout_seconds else None
        while True:
            seen = self._turns_total
            try:
                await workflow.wait_condition(
                    lambda seen=seen: self._closing or self._rotate_due() or self._turns_total != seen,
                    timeout=timeout,
                )
            except TimeoutError:
                if self._turn_lock.locked() and workflow.patched(IDLE_AFTER_TURNS):
                    continue  # A turn in progress is not idle time: wait again once it is answered.
                self._closing = True  # idle: nothing arrived within the timeout
            if self._closing or self._rotate_due():
                break
        # A quiet boundary: every accepted turn answered and persisted before this run ends.
        await workflow.wait_condition(lambda: workflow.all_handlers_finished() and not self._turn_lock.locked())
        if self._closing:
            return ConversationClosed(conversation_id=input.conversation_id, turns=self._turns_total)
        workflow.continue_as_new(input.model_copy(update={'turns_completed': self._turns_total}))

    def _rotate_due(self) -> bool:
        return self._turns_this_run >= self._input.turns_per_run or workflow.info().is_continue_as_new_suggested()

    @workflow.update(name='send')
    async def send(self, turn: TurnInput) -> TurnOutput:
        """Answer one user turn with an agent run; the capability persists it as it goes."""
        self._sends_this_run += 1
        try:
            return await self._answer(turn)
        except BaseException:
            self._sends_this_run -= 1  # A failed turn takes no share: it never counts towards rotation.
            raise

    async def _answer(self, turn: TurnInput) -> TurnOutput:
        async with self._turn_lock:
            if self._history is None:
                loaded = await load_history(
                    self._input.conversation_id, scope=self._input.scope, max_bytes=history_budget()
                )
                self._history = repair_messages(loaded.messages)
                self._window = loaded.window  # every turn of this run's history starts there
            agent = agent_for(self._input.agent)
            try:
                result = await agent.run(
                    turn.prompt,
                    message_history=self._history or None,
                    conversation_id=self._input.conversation_id,
                    deps=RecallDeps(scope=self._input.scope, history_window=self._window),
                )
            except Exception:
                # The store kept what the failed turn said; the next turn loads it rather than forget it.
                if workflow.patched(RELOAD_AFTER_FAILED_TURN):
                    self._history = None
                raise
            self._history = result.all_messages()
            self._turns_total += 1
            self._turns_this_run += 1
            return TurnOutput(output=str(result.output), turn=self._turns_total, run_id=result.run_id)

    @send.validator
    def _validate_send(self, turn: TurnInput) -> None:
        require_prompt(turn.prompt, self._input.max_prompt_bytes)
        agent_for(self._input.agent)
        if self._closing:
            raise ApplicationError('The conversation was closed; start a new workflow to continue it.', type='Closed')
        if self._sends_this_run >= 2 * self._input.turns_per_run:
            # Sends that keep overlapping never leave the quiet moment continue-as-new waits for, and the
            # run's history would grow until Temporal ends it: past twice its share, a run takes no more.
            raise ApplicationError(
                f'This run of the conversation has taken {self._sends_this_run} turns and is continuing as new '
                'once they are answered; send the turn again in a moment and the next run takes it.',
                type='ContinuingAsNew',
            )

    @workflow.update(name='search')
    async def search(self, request: SearchRequest) -> SearchResult:
        """Recall without the model: the conversation, scope and agent are this workflow's, whatever the caller
        sent; the caller's `run_id` and `role` only narrow it, `include_superseded` adds what a retry replaced,
        and `mode` ranks by words, meaning or both. Meaning embeds the query with the agent's
        `ConversationRecall` embedder, else the worker's, else the model the store's vectors were made with."""
        return await recall(
            request.query,
            conversation_id=self._input.conversation_id,
            scope=self._input.scope,
            run_id=request.run_id,
            limit=request.limit,
            context_lines=request.context_lines,
            role=request.role,
            include_superseded=request.include_superseded,
            mode=request.mode,
            agent=registered_name(self._input.agent),
        )

    @search.validator
    def _validate_search(self, request: SearchRequest) -> None:
        """Refuse, before the Update is accepted (nothing in the history), what the search would refuse,
        and the fields it would otherwise ignore."""
        with refused():
            parse_query(request.query)
            SearchOptions(
                limit=request.limit,
                context_lines=request.context_lines,
                parameters=BM25Parameters(k1=request.k1, b=request.b),
            )
            fields = SearchRequest.model_fields
            ignored = [
                name
                for name in ('all_conversations', 'exclude_run_id', 'k1', 'b')
                if getattr(request, name) != fields[name].default
            ]
            if ignored:
                raise InvalidSearchParameters(
                    f'The search Update searches this conversation with the default weights; it does not take '
                    f'{", ".join(ignored)}. Call `recall()` from your own workflow for those.'
                )

    @workflow.signal(name='close')
    def close(self) -> None:
        self._closing = True

    @workflow.query(name='turns')
    def turns(self) -> int:
        return self._turns_total
