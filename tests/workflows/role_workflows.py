"""A user-style workflow that recalls by role from workflow code (for `test_recall_role`)."""

from __future__ import annotations

from typing import cast

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from temporal_recall import SearchResult, recall
    from temporal_recall.search import Role


@workflow.defn(name='tests.RecallByRole')
class RecallByRoleWorkflow:
    @workflow.run
    async def run(self, conversation_id: str, role: str | None) -> SearchResult:
        # Taken as plain text, as input from outside would be: `recall` is what refuses an unknown role.
        return await recall('Paris', conversation_id=conversation_id, role=cast('Role | None', role), limit=10)
