"""What both sides share: the command line, the timing loop, disk bytes, the result file (stdlib only).

Each side is a script run by its own virtualenv's Python, so this module must import nothing but
the standard library: the reference side loads it next to itself, from the script's directory.
Keeping the loop here means both sides time exactly the same thing in the same way; only the two
callables (write one step boundary, run one search) differ.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable
from contextlib import closing
from pathlib import Path
from typing import Any


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('dataset', type=Path, help='workload JSON written by bench/_workload.py')
    parser.add_argument('database', type=Path, help='SQLite file to create')
    parser.add_argument('out', type=Path, help='where to write the measurements (JSON)')
    parser.add_argument('--max-queries', type=int, default=50)
    parser.add_argument('--query-budget', type=float, default=60.0, help='seconds per search target')
    return parser.parse_args()


def steps_of(conversation: dict[str, Any]) -> list[tuple[str, int, list[dict[str, Any]]]]:
    """(run id, step index within the run, the step's new messages) in write order."""
    return [(run['run_id'], index, step) for run in conversation['runs'] for index, step in enumerate(run['steps'])]


def disk_bytes(database: Path) -> int:
    """File size after folding the WAL back in, so both sides are measured the same settled way."""
    with closing(sqlite3.connect(database)) as connection:
        connection.execute('PRAGMA wal_checkpoint(TRUNCATE)')
    return sum(os.path.getsize(p) for p in (database, Path(f'{database}-wal')) if p.exists())


async def time_writes(
    dataset: dict[str, Any], write: Callable[[str, str, int, list[Any], list[Any]], Awaitable[None]], load
) -> list[list[float]]:
    """Write every step boundary in order; returns `[history length after, seconds]` per write.

    `write(conversation_id, run_id, step_index, history_before, new_messages)` is the side's
    store call; `load` turns message dicts into that side's message objects (untimed).
    """
    samples: list[list[float]] = []
    for conversation in dataset['conversations']:
        history: list[Any] = []
        for run_id, index, step in steps_of(conversation):
            new = load(step)
            started = time.perf_counter()
            await write(conversation['id'], run_id, index, history, new)
            samples.append([len(history) + len(new), time.perf_counter() - started])
            history = [*history, *new]
    return samples


async def time_searches(
    dataset: dict[str, Any], search: Callable[[str, str | None], Awaitable[int]], max_queries: int, budget: float
) -> dict[str, dict[str, Any]]:
    """Time queries per target until `max_queries` or `budget` seconds (at least 2 queries).

    Targets are each conversation (`search == 'conversation'`) or the whole store (`all`).
    `search(query, conversation_id)` returns how many hits it found, kept as a sanity check.
    """
    if dataset['search'] == 'all':
        size = sum(2 * len(run['steps']) for c in dataset['conversations'] for run in c['runs'])
        targets = [(f'store {size}', None)]
    else:
        targets = [
            (f'conversation {sum(2 * len(run["steps"]) for run in c["runs"])}', c['id'])
            for c in dataset['conversations']
        ]
    out: dict[str, dict[str, Any]] = {}
    for label, conversation_id in targets:
        seconds: list[float] = []
        hits = 0
        spent = 0.0
        for query in dataset['queries'][:max_queries]:
            started = time.perf_counter()
            hits += await search(query, conversation_id)
            elapsed = time.perf_counter() - started
            seconds.append(elapsed)
            spent += elapsed
            if spent > budget and len(seconds) >= 2:
                break
        out[label] = {'seconds': seconds, 'hits': hits}
    return out


def write_result(path: Path, **result: Any) -> None:
    path.write_text(json.dumps(result))


def load_dataset(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())
