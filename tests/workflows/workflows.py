"""A workflow for tests only: one agent run that returns the run's whole history, to compare with the store."""

from __future__ import annotations

from pydantic import BaseModel, Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.usage import UsageLimits

    from temporal_recall.models import RecallDeps, RunPromptInput
    from temporal_recall.workflows import recall
    from temporal_recall.workflows._agents import agent_named


class RunHistory(BaseModel):
    messages: list[ModelMessage] = Field(default_factory=list[ModelMessage])


@workflow.defn(name='tests.AllMessages')
class AllMessagesWorkflow:
    """`RunPromptWorkflow` without the history load, returning `all_messages()` instead of the output."""

    @workflow.run
    async def run(self, input: RunPromptInput) -> RunHistory:
        result = await agent_named(input.agent).run(
            input.prompt,
            conversation_id=input.conversation_id,
            deps=RecallDeps(scope=input.scope),
            usage_limits=UsageLimits(request_limit=input.request_limit),
        )
        return RunHistory(messages=result.all_messages())


class GivenHistoryInput(BaseModel):
    prompt: str
    conversation_id: str
    agent: str
    history: list[ModelMessage] = Field(default_factory=list[ModelMessage])


@workflow.defn(name='tests.GivenHistory')
class GivenHistoryWorkflow:
    """One agent run from a history the caller passes (not loaded from the store), returning `all_messages()`."""

    @workflow.run
    async def run(self, input: GivenHistoryInput) -> RunHistory:
        result = await agent_named(input.agent).run(
            input.prompt, message_history=input.history, conversation_id=input.conversation_id, deps=RecallDeps()
        )
        return RunHistory(messages=result.all_messages())


@workflow.defn(name='tests.RecallQuery')
class RecallQueryWorkflow:
    """`recall()` with the query the caller passes."""

    @workflow.run
    async def run(self, query: str) -> int:
        return len((await recall(query, conversation_id='conv-any')).hits)
