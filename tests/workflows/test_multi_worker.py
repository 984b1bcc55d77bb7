"""Scale out: several worker processes on one task queue share one PostgreSQL store, and one is killed.

Three workers (separate processes, each with its own connection pool) run 60 conversations at once,
each a `RunPromptWorkflow` whose agent calls a one-second tool. Once some workflows have completed,
a worker that is running tool calls right then is SIGKILLed while other workflows are in flight (its
tool calls, model calls and store writes are retried by the two survivors after the agent's 5 s
activity timeout). Every workflow must complete,
every message must be stored exactly once, and two separate store connections (as two workers
would have) must answer a search identically.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHandle

from temporal_recall import RunPromptInput, RunPromptOutput, RunPromptWorkflow
from temporal_recall.content import content_hash
from temporal_recall.models import SearchRequest
from temporal_recall.search.plan import search_index
from temporal_recall.store import PostgresConversationStore
from temporal_recall.testing import DevServer

from ..store._support import PostgresSite, postgres_url, problems_of
from ._processes import spawn_worker, stop_worker

pytestmark = [pytest.mark.temporal, pytest.mark.postgres, pytest.mark.slow]

WORKERS = 3
CONVERSATIONS = 60
KILL_AFTER_COMPLETED = 5


@pytest.fixture
async def pg_site() -> AsyncIterator[PostgresSite]:
    site = PostgresSite(postgres_url())
    try:
        # Create the schema before the workers start, so the test measures workflows rather than migrations
        # (the concurrent-migration race has its own tests in tests/store/test_postgres_migrations.py).
        await (await site.open()).close()
        yield site
    finally:
        await site.close()


def _lines(path: Path, word: str) -> int:
    return path.read_text().split().count(word) if path.exists() else 0


def _in_flight(logs: list[Path]) -> tuple[int, int]:
    """`(tool calls in flight, worker number)` of the busiest worker right now."""
    return max((_lines(log, 'start') - _lines(log, 'end'), number) for number, log in enumerate(logs))


async def _start(
    client: Client, queue: str, run: str, indices: range
) -> list[WorkflowHandle[RunPromptWorkflow, RunPromptOutput]]:
    """Start conversations `indices` a little apart, so they are at different steps when the kill lands."""
    handles = []
    for index in indices:
        handles.append(
            await client.start_workflow(
                RunPromptWorkflow.run,
                RunPromptInput(
                    prompt=f'What is the weather in Paris for trip {index}?',
                    conversation_id=f'{run}-{index}',
                    agent='pg_weather',
                ),
                id=f'{run}-{index}',
                task_queue=queue,
            )
        )
        await asyncio.sleep(0.1)
    return handles


async def test_workers_sharing_a_postgres_store_survive_a_kill(
    temporal_dev_server: DevServer, temporal_client: Client, pg_site: PostgresSite, tmp_path: Path
) -> None:
    queue = f'multi-worker-{uuid.uuid4()}'
    run = f'mw-{uuid.uuid4().hex[:8]}'
    logs = [tmp_path / f'worker-{number}.log' for number in range(WORKERS)]
    workers = [
        spawn_worker(temporal_dev_server.address, queue, pg_site.url, RECALL_TEST_TOOL_LOG=str(log)) for log in logs
    ]
    pending: set[asyncio.Future[RunPromptOutput]] = set()
    try:
        # Some workflows complete first, whatever the machine's speed: the kill comes after them.
        first_wave = await _start(temporal_client, queue, run, range(KILL_AFTER_COMPLETED))
        before_kill = await asyncio.wait_for(asyncio.gather(*(h.result() for h in first_wave)), timeout=100)
        completed = len(before_kill)
        handles = await _start(temporal_client, queue, run, range(KILL_AFTER_COMPLETED, CONVERSATIONS))
        pending = {asyncio.ensure_future(handle.result()) for handle in handles}
        # Kill at the first moment a worker is in the middle of tool calls (each takes a second).
        while True:
            done = {future for future in pending if future.done()}
            for future in done:
                future.result()  # a failed workflow fails the test here
            pending -= done
            completed += len(done)
            in_flight, number = _in_flight(logs)
            if in_flight > 0:
                break
            # No clock: the runs end on their own, and all of them ending before the moment came fails here.
            assert pending, f'every workflow finished ({completed}) before a worker was seen mid tool call'
            await asyncio.sleep(0.02)
        victim = workers[number]
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
        assert victim.returncode == -signal.SIGKILL
        assert pending, 'every workflow finished before the kill; nothing was in flight'
        outputs = await asyncio.wait_for(asyncio.gather(*pending), timeout=100)
    finally:
        for future in pending:
            future.cancel()
        for worker in workers:
            stop_worker(worker)
    assert all(output.output == 'Sunny in Paris.' for output in [*before_kill, *outputs])
    interrupted = _lines(logs[number], 'start') - _lines(logs[number], 'end')
    assert interrupted > 0  # the calls in flight at the kill never finished there
    # Each conversation's call finished once somewhere, and none of those was an interrupted one.
    assert sum(_lines(log, 'start') for log in logs) >= CONVERSATIONS + interrupted

    # Two separate connections to the store, as two workers would have.
    first = await PostgresConversationStore.open(pg_site.url)
    second = await PostgresConversationStore.open(pg_site.url)
    try:
        for index in range(CONVERSATIONS):
            entries = await first.load_entries(f'{run}-{index}')
            assert entries is not None and len(entries) == 4, index
            assert len({content_hash(entry.message) for entry in entries}) == 4
        stats = await second.stats()
        assert (stats.conversations, stats.entries) == (CONVERSATIONS, 4 * CONVERSATIONS)
        assert await problems_of(first) == []
        report = await second.check()  # what `recall check` runs
        assert report.clean, '\n'.join(map(str, report.findings))
        assert report.entries == 4 * CONVERSATIONS

        everywhere = SearchRequest(query='Paris', all_conversations=True, limit=100)
        seen_by_first = await search_index(first, everywhere)
        assert seen_by_first == await search_index(second, everywhere)
        every_conversation = {f'{run}-{index}' for index in range(CONVERSATIONS)}
        assert {hit.conversation_id for hit in seen_by_first.hits} == every_conversation
        for index in (0, CONVERSATIONS // 2, CONVERSATIONS - 1):
            one = SearchRequest(query='Paris', conversation_id=f'{run}-{index}', context_lines=1)
            found = await search_index(first, one)
            assert found == await search_index(second, one)
            assert len(found.hits) == 4 and {hit.conversation_id for hit in found.hits} == {f'{run}-{index}'}
    finally:
        await first.close()
        await second.close()
