"""Our side of one benchmark phase: temporal-recall's store, run with the project's own Python.

Writes as the persistence capability does: one `append` per step boundary carrying only the new
messages, anchored by `base_length`/`base_hash` on the history the writer already has (as in
`scripts/bench_search.py`), then searches through `search_index`, the code path the recall tool
and activities use.

    .venv/bin/python bench/_our_side.py DATASET.json DB OUT.json [--max-queries N] [--query-budget S]
"""

from __future__ import annotations

import asyncio
import time

from _sidekit import disk_bytes, load_dataset, parse_args, time_searches, time_writes, write_result
from pydantic_ai.messages import ModelMessagesTypeAdapter

from temporal_recall.content import content_hash
from temporal_recall.models import SearchRequest
from temporal_recall.search.plan import search_index
from temporal_recall.store import AppendRequest, open_store

SCOPE = 'bench'


async def main() -> None:
    args = parse_args()
    dataset = load_dataset(args.dataset)
    store = await open_store(str(args.database))
    try:

        async def write(conversation_id, run_id, step_index, history, new) -> None:
            await store.append(
                AppendRequest(
                    conversation_id=conversation_id,
                    scope=SCOPE,
                    idempotency_key=f'{run_id}/{step_index}',
                    base_length=len(history),
                    base_hash=content_hash(history[-1]) if history else None,
                    messages=new,
                    run_id=run_id,
                )
            )

        started = time.perf_counter()
        writes = await time_writes(dataset, write, ModelMessagesTypeAdapter.validate_python)
        write_seconds = time.perf_counter() - started
    finally:
        await store.close()
    size = disk_bytes(args.database)

    store = await open_store(str(args.database))
    try:

        async def search(query: str, conversation_id: str | None) -> int:
            request = SearchRequest(
                query=query,
                scope=SCOPE,
                conversation_id=conversation_id,
                all_conversations=conversation_id is None,
                limit=10,
            )
            return len((await search_index(store, request)).hits)

        searches = await time_searches(dataset, search, args.max_queries, args.query_budget)
    finally:
        await store.close()
    write_result(args.out, writes=writes, write_seconds=write_seconds, bytes=size, searches=searches)


if __name__ == '__main__':
    asyncio.run(main())
