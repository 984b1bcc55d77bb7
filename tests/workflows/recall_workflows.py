"""A user-style workflow that recalls, with or without what a retry superseded (for `test_recall_superseded`
and `test_recall_reach`)."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from temporal_recall import SearchResult, recall


@workflow.defn(name='tests.Recall')
class RecallWorkflow:
    @workflow.run
    async def run(self, conversation_id: str, query: str, include_superseded: bool) -> SearchResult:
        return await recall(query, conversation_id=conversation_id, include_superseded=include_superseded, limit=10)
