"""One agent run for one prompt, in a named conversation."""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic_ai.agent.abstract import AbstractAgent
    from pydantic_ai.messages import repair_messages
    from pydantic_ai.usage import UsageLimits

    from ..models import DEFAULT_HISTORY_BYTES, RecallDeps, RunPromptInput, RunPromptOutput
    from ._agents import agent_named
    from ._recall import load_history

__all__ = ('BOUNDED_HISTORY', 'PROMPT_BOUND', 'RunPromptWorkflow', 'agent_for', 'history_budget', 'require_prompt')

PROMPT_BOUND = 'temporal-recall-prompt-bound'
"""Patch marker: `RunPromptWorkflow` refuses a prompt over `max_prompt_bytes` before it runs."""

BOUNDED_HISTORY = 'temporal-recall-bounded-history'
"""Patch marker: the shipped workflows load at most `DEFAULT_HISTORY_BYTES` of stored history, its
newest whole turns. Before it, a conversation stored past one payload could never be continued."""


def history_budget() -> int | None:
    """How much stored history to load (`load_history(max_bytes=...)`): bounded since `BOUNDED_HISTORY`."""
    return DEFAULT_HISTORY_BYTES if workflow.patched(BOUNDED_HISTORY) else None


def require_prompt(prompt: str, max_bytes: int | None) -> None:
    """Refuse a prompt no model request could carry, before it is in the history.

    An oversized prompt would make scheduling the model request fail the workflow task, which
    Temporal retries forever: the conversation would be stuck.
    """
    if not prompt.strip():
        raise ApplicationError(
            'The prompt is empty. Send the text the user typed; whitespace alone is not a turn.',
            type='EmptyPrompt',
            non_retryable=True,
        )
    size = len(prompt.encode('utf-8', 'surrogatepass'))
    if max_bytes is not None and size > max_bytes:
        raise ApplicationError(
            f'The prompt is {size:,} bytes (UTF-8), more than the {max_bytes:,} this workflow takes '
            '(`max_prompt_bytes`). Send a reference to a large document instead of its text, or raise '
            '`max_prompt_bytes` if the message codec keeps large payloads in the store.',
            type='PayloadTooLarge',
            non_retryable=True,
        )


def agent_for(name: str | None) -> AbstractAgent[Any, Any]:
    """The registered agent `name`; an unknown name fails as a non-retryable `UnknownAgent`.

    Raised as a plain `LookupError` it would fail the workflow task, which Temporal retries forever.
    """
    try:
        return agent_named(name)
    except LookupError as error:
        raise ApplicationError(str(error), type='UnknownAgent', non_retryable=True) from None


@workflow.defn(name='temporal_recall.RunPrompt')
class RunPromptWorkflow:
    """Load the conversation from the store, run the agent once, and let the capability persist it."""

    @workflow.run
    async def run(self, input: RunPromptInput) -> RunPromptOutput:
        # Since PROMPT_BOUND: a run started before it, with a longer prompt, replays as it ran.
        require_prompt(input.prompt, input.max_prompt_bytes if workflow.patched(PROMPT_BOUND) else None)
        agent = agent_for(input.agent)
        history = []
        window = None
        if input.continue_history or not input.create:
            loaded = await load_history(input.conversation_id, scope=input.scope, max_bytes=history_budget())
            if not loaded.exists and not input.create:
                raise ApplicationError(
                    f'Conversation {input.conversation_id!r} is not in the store; pass `create=True` to start it.',
                    type='UnknownConversation',
                    non_retryable=True,
                )
            if input.continue_history:
                # A run that failed mid-step leaves tool calls without returns in the store; close
                # them out (deterministically) so the new prompt is accepted.
                history = repair_messages(loaded.messages)
                window = loaded.window  # where a history loaded without its oldest turns starts
        result = await agent.run(
            input.prompt,
            message_history=history or None,
            conversation_id=input.conversation_id,
            deps=RecallDeps(scope=input.scope, history_window=window),
            usage_limits=UsageLimits(request_limit=input.request_limit),
        )
        return RunPromptOutput(
            output=str(result.output),
            conversation_id=input.conversation_id,
            run_id=result.run_id,
            new_messages=len(result.new_messages()),
        )
