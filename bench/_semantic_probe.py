"""One process that searches a filled store by meaning, scope-wide, and reports what it cost: the probe of
`bench/_scale_semantic.py`, run as `python -m bench._semantic_probe` so its memory is its own.

    python -m bench._semantic_probe STORE QUERIES.json [--src DIR]

Prints one line of JSON: the resident memory before the first search and the peak after the last
(`VmRSS` and `VmHWM` from /proc/self/status), the cold first search, each query's wall and CPU time
(`search_index`, the path the recall tool takes, with the query's embedding), and, untimed, the ten
nearest documents of each query by `nearest` with the unit query vectors, for recall against the
exact ranking. `--src` puts another checkout's `src` first on the path, so the commit before can be
measured on the same store by the same probe: it uses only what both commits have.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any


def _status_kib(field: str) -> int:
    for line in Path('/proc/self/status').read_text().splitlines():
        if line.startswith(f'{field}:'):
            return int(line.split()[1])
    raise RuntimeError(f'no {field} in /proc/self/status')


async def probe(store_path: str, queries: list[str], scope: str) -> dict[str, Any]:
    from temporal_recall import open_store
    from temporal_recall.embeddings import LOCAL_MODEL, as_embedder
    from temporal_recall.embeddings._vectors import embed_texts
    from temporal_recall.models import SearchRequest
    from temporal_recall.search.plan import search_index
    from temporal_recall.store import SearchTarget

    embedder = as_embedder(LOCAL_MODEL)
    assert embedder is not None
    store = await open_store(store_path)
    try:
        await embed_texts(embedder, ['load the model'], input_type='query')  # the model's load is not the search's
        before = _status_kib('VmRSS')
        started = time.perf_counter()
        request = SearchRequest(query=queries[0], scope=scope, all_conversations=True, mode='semantic', limit=10)
        await search_index(store, request, embedder=embedder)
        cold = time.perf_counter() - started
        wall: list[float] = []
        cpu: list[float] = []
        for query in queries:
            request = SearchRequest(query=query, scope=scope, all_conversations=True, mode='semantic', limit=10)
            began, began_cpu = time.perf_counter(), time.process_time()
            await search_index(store, request, embedder=embedder)
            wall.append(time.perf_counter() - began)
            cpu.append(time.process_time() - began_cpu)
        peak = _status_kib('VmHWM')
        embedded = await embed_texts(embedder, queries, input_type='query')
        vectors = embedded.vectors
        nearest: list[list[int]] = []
        for vector in vectors:
            found = await store.nearest(SearchTarget(scope=scope, conversation_id=None), embedded.model, vector, 10)
            nearest.append([doc for doc, _ in (found[0] if found else [])])
    finally:
        await store.close()
    return {
        'rss_before_kib': before,
        'peak_kib': peak,
        'cold_ms': cold * 1000,
        'wall_seconds': wall,
        'cpu_seconds': cpu,
        'nearest': nearest,
        'query_vectors': [vector.tolist() for vector in vectors],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('store')
    parser.add_argument('queries', help='a JSON list of query texts')
    parser.add_argument('--scope', default='bench')
    parser.add_argument('--src', help="another checkout's src directory, imported instead of this one's")
    args = parser.parse_args()
    if args.src:
        sys.path.insert(0, args.src)
    queries = json.loads(Path(args.queries).read_text())
    print(json.dumps(asyncio.run(probe(args.store, queries, args.scope))))


if __name__ == '__main__':
    main()
