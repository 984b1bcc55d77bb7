"""After a retried model activity answers differently, recall finds the answer the run kept, not the one the
retry replaced, unless superseded text is asked for: on a real dev server, through workflow code and the search
Update, on both backends."""

from __future__ import annotations

import uuid

import pytest
from pydantic_ai.messages import TextPart
from temporalio.client import Client

from temporal_recall import (
    ConversationInput,
    ConversationWorkflow,
    SearchRequest,
    SearchResult,
    TurnInput,
    search_index,
)
from temporal_recall.store import open_store
from temporal_recall.testing import running_worker

from .agents import retried_agent
from .recall_workflows import RecallWorkflow
from .test_in_activity import FailAfterFirstAnswer, _run
from .workflows import AllMessagesWorkflow

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


def _answers(result: SearchResult) -> list[str]:
    return sorted(hit.excerpt for hit in result.hits if hit.role == 'assistant' and 'attempt' in hit.excerpt)


async def test_recall_after_a_retry_finds_the_kept_answer_and_the_replaced_one_only_on_request(
    temporal_client: Client, any_store_url: str
) -> None:
    store = await open_store(any_store_url)
    failing = FailAfterFirstAnswer(store)
    try:
        async with running_worker(
            temporal_client,
            agents=[retried_agent],
            store=failing,
            workflows=[AllMessagesWorkflow, RecallWorkflow],
        ) as worker:
            persisted, _ = await _run(temporal_client, worker.task_queue, 'retried', 'conv-retried-recall')
            assert failing.failed == 1
            assert persisted.messages[-1].parts == [TextPart('answer from attempt 2')]  # type: ignore[union-attr]

            async def recalled(include_superseded: bool) -> SearchResult:
                return await temporal_client.execute_workflow(
                    RecallWorkflow.run,
                    args=['conv-retried-recall', 'answer attempt', include_superseded],
                    id=f'recall-{uuid.uuid4()}',
                    task_queue=worker.task_queue,
                )

            assert _answers(await recalled(False)) == ['answer from attempt 2']
            assert _answers(await recalled(True)) == ['answer from attempt 1', 'answer from attempt 2']
        # The library's entry point answers alike.
        request = SearchRequest(query='answer attempt', conversation_id='conv-retried-recall')
        assert _answers(await search_index(store, request)) == ['answer from attempt 2']
        both = await search_index(store, request.model_copy(update={'include_superseded': True}))
        assert _answers(both) == ['answer from attempt 1', 'answer from attempt 2']
    finally:
        await store.close()


async def test_the_search_update_passes_include_superseded_on(temporal_client: Client, any_store_url: str) -> None:
    """The Update searches the workflow's own conversation, and what a retry superseded when asked (by either name)."""
    store = await open_store(any_store_url)
    failing = FailAfterFirstAnswer(store)
    try:
        async with running_worker(temporal_client, agents=[retried_agent], store=failing) as worker:
            handle = await temporal_client.start_workflow(
                ConversationWorkflow.run,
                ConversationInput(conversation_id='conv-update-branches', agent='retried'),
                id=f'conversation-{uuid.uuid4()}',
                task_queue=worker.task_queue,
            )
            await handle.execute_update(ConversationWorkflow.send, TurnInput(prompt='Weather in Paris?'))
            assert failing.failed == 1
            plain = await handle.execute_update(ConversationWorkflow.search, SearchRequest(query='answer attempt'))
            wide = await handle.execute_update(
                ConversationWorkflow.search, SearchRequest(query='answer attempt', include_superseded=True)
            )
            with pytest.warns(DeprecationWarning, match='include_branches'):
                old = SearchRequest(query='answer attempt', include_branches=True)  # type: ignore[call-arg]
            renamed = await handle.execute_update(ConversationWorkflow.search, old)
            assert _answers(plain) == ['answer from attempt 2']
            assert _answers(wide) == _answers(renamed) == ['answer from attempt 1', 'answer from attempt 2']
            await handle.signal(ConversationWorkflow.close)
            await handle.result()
    finally:
        await store.close()
