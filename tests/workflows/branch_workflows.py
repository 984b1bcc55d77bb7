"""A user-style workflow that recalls with or without the branches a conversation left (for `test_recall_branches`)."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from temporal_recall import SearchResult, recall


@workflow.defn(name='tests.RecallBranches')
class RecallBranchesWorkflow:
    @workflow.run
    async def run(self, conversation_id: str, query: str, include_branches: bool) -> SearchResult:
        return await recall(query, conversation_id=conversation_id, include_branches=include_branches, limit=10)
