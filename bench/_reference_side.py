"""The reference side of one benchmark phase: pydantic-ai-harness 0.62, run with `bench/.reference-venv`.

Imports only that virtualenv's packages and the standard library (`_sidekit` is stdlib only).
Writes the way `StepPersistence` does: each run registered once (`register_run`), then at every
step boundary a `ContinuableSnapshot` of the run's whole history so far (`save_snapshot`), into a
`SqliteStepStore`. A conversation's later runs start from the earlier history, as a run continued
with `message_history` does, so their snapshots carry it too. Searches call the
`search_conversation_history` tool of `ConversationSearchToolset` over a `SnapshotHistorySource`,
conversation-scoped or store-wide, with the same BM25 parameters, limit and no context lines, as
our side uses. Events (`append_event`) are not written: they are not searched, and would only add
to the reference's cost.

    bench/.reference-venv/bin/python bench/_reference_side.py DATASET.json DB OUT.json [...]
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from types import SimpleNamespace

from _sidekit import disk_bytes, load_dataset, parse_args, time_searches, time_writes, write_result
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai_harness.conversation_search import ConversationSearchToolset, SnapshotHistorySource
from pydantic_ai_harness.step_persistence import ContinuableSnapshot, RunRecord, SqliteStepStore

FOUND = re.compile(r'Found (\d+) match')


async def main() -> None:
    args = parse_args()
    dataset = load_dataset(args.dataset)
    store = SqliteStepStore(database=args.database)
    registered: set[str] = set()

    async def write(conversation_id, run_id, step_index, history, new) -> None:
        if run_id not in registered:
            registered.add(run_id)
            record = RunRecord(run_id=run_id, conversation_id=conversation_id, registration_id=str(uuid.uuid4()))
            await store.register_run(record)
        snapshot = ContinuableSnapshot(
            run_id=run_id,
            step_index=step_index,
            messages=[*history, *new],
            conversation_id=conversation_id,
            idempotency_key=f'{step_index}:{step_index}:complete',
        )
        await store.save_snapshot(snapshot)

    started = time.perf_counter()
    writes = await time_writes(dataset, write, ModelMessagesTypeAdapter.validate_python)
    write_seconds = time.perf_counter() - started
    size = disk_bytes(args.database)

    store = SqliteStepStore(database=args.database)
    toolsets = {
        scope: ConversationSearchToolset(
            SnapshotHistorySource(store),
            tool_id=f'bench-{scope}',
            max_matches=10,
            context_lines=0,
            bm25_k1=1.5,
            bm25_b=0.75,
            scope=scope,
        )
        for scope in ('conversation', 'all')
    }

    async def search(query: str, conversation_id: str | None) -> int:
        scope = 'all' if conversation_id is None else 'conversation'
        # The tool reads only `conversation_id` from its run context.
        context = SimpleNamespace(conversation_id=conversation_id)
        text = await toolsets[scope].search_conversation_history(context, query)
        found = FOUND.match(text)
        return int(found.group(1)) if found else 0

    searches = await time_searches(dataset, search, args.max_queries, args.query_budget)
    write_result(args.out, writes=writes, write_seconds=write_seconds, bytes=size, searches=searches)


if __name__ == '__main__':
    asyncio.run(main())
