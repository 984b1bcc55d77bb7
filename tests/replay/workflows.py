"""Workflows that exist only for replay tests: a user-style workflow calling recall, and a
deliberately changed copy of a shipped workflow that must fail replay."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from temporal_recall import SearchResult, recall
    from temporal_recall.models import RecallDeps, RunPromptInput, RunPromptOutput
    from temporal_recall.workflows._agents import agent_named


@workflow.defn(name='tests.RecallDirectly')
class RecallDirectlyWorkflow:
    """Recall from workflow code, as a user's escalation workflow would."""

    @workflow.run
    async def run(self, conversation_id: str) -> SearchResult:
        return await recall('Paris weather', conversation_id=conversation_id, limit=3)


@workflow.defn(name='temporal_recall.RunPrompt')
class ChangedRunPromptWorkflow:
    """`RunPromptWorkflow` with its history load removed: replaying an old history must refuse it."""

    @workflow.run
    async def run(self, input: RunPromptInput) -> RunPromptOutput:
        agent = agent_named(input.agent)
        result = await agent.run(
            input.prompt, conversation_id=input.conversation_id, deps=RecallDeps(scope=input.scope)
        )
        return RunPromptOutput(output=str(result.output), conversation_id=input.conversation_id, run_id=result.run_id)
