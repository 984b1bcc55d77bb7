"""A workflow that recalls by meaning from workflow code (the query is embedded in the search activity)."""

from __future__ import annotations

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from temporal_recall import recall
    from temporal_recall.models import SearchResult
    from temporal_recall.search import SearchMode


class RecallInput(BaseModel):
    query: str
    conversation_id: str | None
    scope: str | None = None
    mode: SearchMode | None = None


@workflow.defn(name='tests.RecallByMeaning')
class RecallByMeaningWorkflow:
    @workflow.run
    async def run(self, input: RecallInput) -> SearchResult:
        return await recall(
            input.query,
            conversation_id=input.conversation_id,
            scope=input.scope,
            all_conversations=input.conversation_id is None,
            mode=input.mode,
            role='user',
        )
