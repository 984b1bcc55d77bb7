"""What both sides share: the command line, the timing loop, disk bytes, the result file (stdlib only).

Each side is a script run by its own virtualenv's Python, so this module must import nothing but
the standard library: the reference side loads it next to itself, from the script's directory.
Keeping the loop here means both sides time exactly the same thing in the same way; only the two
callables (write one step boundary, run one search) differ. The Temporal rows share the same way:
the scripted model turns, the tool, and how a run's history is counted.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sqlite3
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any, NoReturn


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


# --- The Temporal rows: one scripted workload, two durable integrations ---------------------------

TEMPORAL_PROMPT = 'What is the weather?'
TEMPORAL_WORKLOADS: dict[str, tuple[str, ...]] = {
    'three_step': ('Paris',),
    'tool_loop_45': tuple(f'city-{number}' for number in range(45)),
    'output_tool': ('Paris',),
}
"""Workload name -> the cities the model asks `get_weather` about, one call per model response.

`three_step` is model → tool → model; `tool_loop_45` is 45 such calls and then the answer (91
activities without persistence); `output_tool` is `three_step` whose answer is a call of the output
tool `final_result` (`OUTPUT_TOOL_ARGS`), so the run ends in that tool's return, which no model
request carries (ours only: the reference's agent has no structured output). Both sides script
their `FunctionModel` from this table through `scripted_turn`, so they send the same calls,
arguments and ids in the same order.
"""


WORKFLOW_TASK_TIMEOUT = timedelta(seconds=60)
"""Set on both sides' workflows instead of Temporal's 10 s default.

A workflow task that times out is retried, and the retry adds events to the history we count. The
reference's first task rebuilds its agents in the sandbox, 3 s and more on 2.62 (see `_temporal_reference.py`),
and a busy 2-core machine could stretch that past 10 s. `history_cost` reports any retry that
happened anyway, and the driver refuses such a result.
"""


OUTPUT_TOOL_ARGS = {'city': 'Paris', 'sky': 'sunny'}


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f'It is sunny in {city}, 21 degrees.'


def scripted_turn(workload: str, tool_returns: int) -> tuple[str, dict[str, str], str] | str:
    """The model's next turn after `tool_returns` tool results: `(tool, args, call id)` or the answer text.

    Chosen from the history rather than a counter, so a retried or replayed request gets the same answer.
    """
    cities = TEMPORAL_WORKLOADS[workload]
    if tool_returns < len(cities):
        return 'get_weather', {'city': cities[tool_returns]}, f'call-{tool_returns}'
    if workload == 'output_tool':
        return 'final_result', OUTPUT_TOOL_ARGS, 'call-final'
    return f'Checked {len(cities)} cities.'


def agent_name(workload: str, persisted: bool | str) -> str:
    """Same length with and without persistence, so activity names weigh the same in history bytes.

    `persisted` may also name a configuration of four letters (ours: `tool`, persistence plus the recall tool).
    """
    config = persisted if isinstance(persisted, str) else 'with' if persisted else 'none'
    return f'{workload}_{config}'


@functools.cache
def parse_temporal_args(*, step_store: bool = False) -> argparse.Namespace:
    """The Temporal side scripts' command line; `step_store` adds the reference's `--step-store FILE`.

    Cached because the reference's workflow sandbox re-executes its script, which reads its arguments
    at import: this module is passed through, so the sandbox gets the worker's parsed arguments back
    instead of running argparse there (it calls `locale`, which the sandbox forbids).
    """
    parser = argparse.ArgumentParser(description='Run the Temporal workloads with and without persistence.')
    parser.add_argument('address', help='Temporal frontend, host:port (the driver starts one dev server)')
    parser.add_argument('out', type=Path, help='where to write the measurements (JSON)')
    parser.add_argument('--workloads', default=','.join(TEMPORAL_WORKLOADS), help='comma-separated names')
    if step_store:
        parser.add_argument('--step-store', type=Path, required=True, help='SQLite file for StepPersistence')
    args = parser.parse_args()
    args.workloads = args.workloads.split(',')
    unknown = set(args.workloads) - set(TEMPORAL_WORKLOADS)
    if unknown:
        parser.error(f'unknown workloads {sorted(unknown)}; known: {", ".join(TEMPORAL_WORKLOADS)}')
    return args


def history_cost(events: Iterable[Any]) -> dict[str, int]:
    """What one workflow run cost Temporal, from its history events (temporalio protobuf messages).

    Activities are the `ActivityTaskScheduled` events; their input bytes are the encoded payloads
    the worker sent to the server (what counts against Temporal's blob-size limit and is stored
    with the history). Both sides run exactly this count, duck-typed so this module stays stdlib only.
    """
    events = list(events)
    scheduled = [
        event.activity_task_scheduled_event_attributes
        for event in events
        if event.HasField('activity_task_scheduled_event_attributes')
    ]
    retried = ('workflow_task_timed_out_event_attributes', 'workflow_task_failed_event_attributes')
    return {
        'workflow_task_retries': sum(any(event.HasField(kind) for kind in retried) for event in events),
        'activities': len(scheduled),
        'events': len(events),
        'activity_input_bytes': sum(payload.ByteSize() for a in scheduled for payload in a.input.payloads),
        'history_bytes': sum(event.ByteSize() for event in events),
    }


def write_result_and_exit(path: Path, **result: Any) -> NoReturn:
    """Write the result file whole, then leave without interpreter finalization.

    A process that ran a Temporal worker can abort while Python finalizes (temporalio's Rust core
    still holds threads: "Fatal Python error: PyGILState_Release", exit status 134), after all its
    work is done. Skipping finalization with `os._exit` avoids that; the rename makes the file
    appear complete or not at all, so the driver never reads half a result.
    """
    partial = path.with_suffix('.partial')
    partial.write_text(json.dumps(result))
    partial.replace(path)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
