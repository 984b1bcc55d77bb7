"""CPU per `agent.run` with and without `ConversationRecall`, in one process, and where the write's time goes.

    .venv/bin/python scripts/measure_step_cost.py [--runs 200] [--rounds 3] [--backends sqlite,postgresql]
        [--postgres postgresql://postgres@127.0.0.1:5432/test] [--profile-runs 100] [--top 15]

A script that prints numbers, never a timed test (issue 42, item 2).

The agent is `bench/fleet_agent.py`'s (4 model requests: three tool calls, then an answer; 8
messages), with no model latency and without `TemporalDurability`: a plain `agent.run`, each in a
conversation of its own. Without persistence the store is never touched; with it,
`ConversationRecall(store=...)` writes every model request's messages through the store's `append`;
"nothing stored" is the capability over `bench.fleet_agent.NothingStored`, a store that acknowledges
each append and keeps nothing: the capability's own cost, the least any store could add to it.
For each backend the three variants alternate (the order reverses every round), and each cell is
the process CPU time (`time.process_time`, every thread of this process) per run: its median, and
its mean in brackets, and the CPU spent inside the store's `append` per run (nothing else runs
while a run waits for it), which the summary gives as a share of what persistence adds. On
PostgreSQL the server's CPU comes on top: the CPU its backends serving this store spent (read from
/proc when the server runs on this machine) is given per run too.

Then one profiled pass per backend with persistence: a cProfile of each `append` (the event loop's
thread) and, on SQLite, of each write transaction on the store's connection thread (where SQLite's
write runs), both timed in thread CPU time, summed, and printed as the functions `append` reached,
as shares of the profiled time, by cumulative and by own time.

Every PostgreSQL run gets a fresh schema (`step_cost_<hex>`), dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'src'))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for bench/

from bench._process_cpu import process_cpu
from bench._provenance import DEFAULT_POSTGRES_URL, header, postgres_schema
from bench.fleet_agent import FLOOR, FLOOR_LABEL, WITH, WITHOUT, NothingStored, build, prompt_for

from temporal_recall import ConversationRecall, RecallDeps, open_store

BACKENDS = ('sqlite', 'postgresql')


@dataclass
class Cell:
    """One batch of runs of one variant on one backend: process CPU per run, and the server's."""

    cpu: list[float] = field(default_factory=list[float])
    server_seconds: float | None = None
    server_complete: bool = True
    append_seconds: float = 0.0
    """Process CPU spent inside the store's `append` (nothing else runs meanwhile), all runs."""

    def describe(self) -> str:
        return f'{statistics.median(self.cpu) * 1000:6.1f} ({statistics.fmean(self.cpu) * 1000:5.1f})'

    def server_per_run(self) -> float | None:
        return None if self.server_seconds is None else self.server_seconds / len(self.cpu)


def _with_option(url: str, name: str, value: str) -> str:
    parts = urlsplit(url)
    query = [*parse_qsl(parts.query, keep_blank_values=True), (name, value)]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ''))


class ServerClock:
    """The CPU time PostgreSQL's backends for one `application_name` have spent, from /proc (same machine)."""

    def __init__(self, url: str, application_name: str) -> None:
        self.url = url
        self.application_name = application_name

    async def sample(self) -> dict[int, float] | None:
        """CPU seconds of each backend serving the store now; `None` when the server runs elsewhere."""
        import asyncpg

        parts = urlsplit(self.url)
        if parts.hostname not in ('127.0.0.1', '::1', 'localhost'):
            return None  # its backends' pids are not this machine's processes
        connection = await asyncpg.connect(urlunsplit((parts.scheme, parts.netloc, parts.path, '', '')))
        try:
            rows = await connection.fetch(
                'SELECT pid FROM pg_stat_activity WHERE application_name = $1', self.application_name
            )
        finally:
            await connection.close()
        seconds: dict[int, float] = {}
        for (pid,) in rows:
            spent = process_cpu(pid)
            if spent is not None:  # else the backend ended just now
                seconds[pid] = spent
        return seconds or None

    @staticmethod
    def spent(before: dict[int, float], after: dict[int, float]) -> tuple[float, bool]:
        """CPU seconds between two samples, and whether it is complete: a backend the pool closed in
        between took its last seconds with it (the figure is then a lower bound)."""
        total = sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())
        return total, set(before) <= set(after)


@asynccontextmanager
async def opened(backend: str, postgres: str, tmp: Path) -> AsyncGenerator[tuple[Any, ServerClock | None]]:
    """A fresh store of `backend`, and a clock of its server's CPU (PostgreSQL on this machine)."""
    if backend == 'sqlite':
        async with await open_store(f'sqlite:///{tmp}/step-cost.db') as store:
            yield store, None
        return
    async with postgres_schema(postgres, 'step_cost') as url:
        name = f'step-cost-{uuid.uuid4().hex[:8]}'
        async with await open_store(_with_option(url, 'application_name', name)) as store:
            yield store, ServerClock(postgres, name)


class AppendClock:
    """Process CPU inside a store's `append`, summed: a run does nothing else while it waits for one."""

    def __init__(self, store: Any) -> None:
        self.seconds = 0.0
        original: Callable[..., Any] = store.append

        async def append(request: Any) -> Any:
            started = time.process_time()
            try:
                return await original(request)
            finally:
                self.seconds += time.process_time() - started

        store.append = append


async def batch(agent: Any, runs: int, server: ServerClock | None, clock: AppendClock | None = None) -> Cell:
    cell = Cell()
    before = None if server is None else await server.sample()
    appended = 0.0 if clock is None else clock.seconds
    for _ in range(runs):
        conversation_id = f'step-{uuid.uuid4().hex[:12]}'
        started = time.process_time()
        await agent.run(prompt_for(conversation_id), conversation_id=conversation_id, deps=RecallDeps())
        cell.cpu.append(time.process_time() - started)
    after = None if server is None else await server.sample()
    cell.append_seconds = 0.0 if clock is None else clock.seconds - appended
    if before is not None and after is not None:
        cell.server_seconds, cell.server_complete = ServerClock.spent(before, after)
    return cell


def agents_for(store: Any) -> dict[str, Any]:
    return {
        'without': build(WITHOUT, recall=None, latency=0, durable=False),
        'with': build(WITH, recall=ConversationRecall(store=store), latency=0, durable=False),
        FLOOR_LABEL: build(FLOOR, recall=ConversationRecall(store=NothingStored()), latency=0, durable=False),
    }


async def measure(args: argparse.Namespace, tmp: Path) -> dict[str, list[dict[str, Cell]]]:
    """Per backend, per round, every variant: alternated within each backend's store."""
    results: dict[str, list[dict[str, Cell]]] = {}
    for backend in args.backends:
        async with opened(backend, args.postgres, tmp) as (store, server):
            clock = AppendClock(store)
            agents = agents_for(store)
            for agent in agents.values():  # warm up: imports, schema caches, the first statements
                await batch(agent, args.warmup, None)
            rounds: list[dict[str, Cell]] = []
            for number in range(args.rounds):
                order = list(agents) if number % 2 == 0 else list(reversed(agents))
                cells = {variant: await batch(agents[variant], args.runs, server, clock) for variant in order}
                rounds.append(cells)
                print(f'{backend:10} round {number + 1}: ' + describe_round(cells), flush=True)
                print(f'{"":10} {"":7}  ' + describe_floor(cells), flush=True)
            results[backend] = rounds
    return results


def describe_round(cells: dict[str, Cell]) -> str:
    without, with_ = cells['without'], cells['with']
    ratio = statistics.median(with_.cpu) / statistics.median(without.cpu)
    line = f'without {without.describe()} ms | with {with_.describe()} ms | with/without {ratio:.2f}x'
    line += f' | append {with_.append_seconds / len(with_.cpu) * 1000:.1f} ms per run'
    server = with_.server_per_run()
    if server is not None:
        at_least = '' if with_.server_complete else 'at least '
        line += f' | server CPU with {at_least}{server * 1000:.1f} ms per run'
    return line


def describe_floor(cells: dict[str, Cell]) -> str:
    floor, without = cells[FLOOR_LABEL], cells['without']
    ratio = statistics.median(floor.cpu) / statistics.median(without.cpu)
    return f'{FLOOR_LABEL} {floor.describe()} ms | {FLOOR_LABEL}/without {ratio:.2f}x'


class AppendProfiler:
    """cProfile of each `append` and, on SQLite, of each write transaction on the connection thread.

    Both profilers time thread CPU (`time.thread_time`), so the event loop's wait for the connection
    thread or the server is not counted and the work on either side is, each in its own thread. A
    Python timer makes cProfile slower than the run it profiles: read the shares, not the totals.
    """

    def __init__(self) -> None:
        self.loop_side = cProfile.Profile(time.thread_time)
        self.thread_side = cProfile.Profile(time.thread_time)

    def wrap_append(self, store: Any) -> None:
        original: Callable[..., Any] = store.append

        async def append(request: Any) -> Any:
            self.loop_side.enable()
            try:
                return await original(request)
            finally:
                self.loop_side.disable()

        store.append = append

    def wrap_sqlite_transactions(self) -> Callable[[], None]:
        """Profile SQLite's write transactions where they run; returns the undo."""
        from temporal_recall.store.sqlite import _connection  # a benchmark's look inside, not an API

        original = _connection._write_transaction

        def transaction(connection: Any, writer: Any) -> Any:
            self.thread_side.enable()
            try:
                return original(connection, writer)
            finally:
                self.thread_side.disable()

        _connection._write_transaction = transaction

        def undo() -> None:
            _connection._write_transaction = original

        return undo

    def under_append(self) -> dict[tuple[str, int, str], tuple[int, float, float]]:
        """`(calls, own seconds, cumulative seconds)` of every function `append` reached, on either thread.

        The loop-side profile also sees the frames an `await` resumes on the way down to `append`
        (the agent graph's); only `append` and what it called are kept.
        """
        stats: dict[Any, Any] = {}
        for profiler in (self.loop_side, self.thread_side):
            if not profiler.getstats():
                continue  # PostgreSQL: no write transaction on a thread of its own
            for function, (_, calls, own, cumulative, callers) in pstats.Stats(profiler).stats.items():  # type: ignore[attr-defined]
                known = stats.setdefault(function, [0, 0.0, 0.0, set()])
                known[0] += calls
                known[1] += own
                known[2] += cumulative
                known[3].update(callers)
        children: dict[Any, set[Any]] = {}
        for function, (*_, callers) in stats.items():
            for caller in callers:
                children.setdefault(caller, set()).add(function)
        roots = [f for f in stats if f[2] == 'append' and f[0].endswith(os.path.join('store', '_engine.py'))]
        # The thread-side profile starts inside the wrapper: its outermost call is the transaction.
        roots += [f for f in stats if f[2] == '_write_transaction']
        reached, queue = set(roots), list(roots)
        while queue:
            for child in children.get(queue.pop(), ()):
                if child not in reached:
                    reached.add(child)
                    queue.append(child)
        return {function: tuple(stats[function][:3]) for function in reached}  # type: ignore[misc]


def _where(function: tuple[str, int, str]) -> str:
    filename, line, name = function
    if filename == '~':
        return name  # a built-in, e.g. <method 'execute' of 'sqlite3.Connection' objects>
    path = Path(filename)
    for anchor in ('temporal_recall', 'site-packages'):
        if anchor in path.parts:
            path = Path(*path.parts[path.parts.index(anchor) + (anchor == 'site-packages') :])
            break
    return f'{path.name if path.is_absolute() else path}:{line}({name})'


def profile_summary(profiler: AppendProfiler, runs: int, top: int) -> str:
    under = profiler.under_append()
    total = sum(own for _, own, _ in under.values())
    lines = [
        f'  profiled CPU under append: {total / runs * 1000:.1f} ms per run (inflated by the profiler)',
        f'  {"cumulative %":>12} {"own %":>6} {"calls/run":>9}  by cumulative time (a coroutine counts',
        f'  {"":>12} {"":>6} {"":>9}  each resumption as a call)',
    ]

    def row(function: Any) -> str:
        calls, own, cumulative = under[function]
        return f'  {cumulative / total:12.0%} {own / total:6.0%} {calls / runs:9.1f}  {_where(function)}'

    lines += [row(f) for f in sorted(under, key=lambda f: under[f][2], reverse=True)[:top]]
    lines.append(f'  {"":>12} {"":>6} {"":>9}  by own time')
    lines += [row(f) for f in sorted(under, key=lambda f: under[f][1], reverse=True)[: max(5, top // 2)]]
    return '\n'.join(lines)


async def profile(backend: str, args: argparse.Namespace, tmp: Path) -> str:
    profiler = AppendProfiler()
    undo = profiler.wrap_sqlite_transactions() if backend == 'sqlite' else (lambda: None)
    try:
        async with opened(backend, args.postgres, tmp / 'profile') as (store, _):
            agent = agents_for(store)['with']
            await batch(agent, args.warmup, None)
            profiler.wrap_append(store)
            await batch(agent, args.profile_runs, None)
    finally:
        undo()
    return profile_summary(profiler, args.profile_runs, args.top)


@dataclass(frozen=True)
class Summary:
    """One backend over all rounds: medians of the rounds' per-run figures (seconds)."""

    backend: str
    without: float
    with_: float
    append: float
    """Process CPU inside `append` per run with persistence."""
    floor: float
    """The capability over a store that keeps nothing (`NothingStored`)."""

    def describe(self) -> str:
        added = self.with_ - self.without
        return (
            f'  {self.backend:10} without {self.without * 1000:6.1f} ms | with {self.with_ * 1000:6.1f} ms | '
            f'with/without {self.with_ / self.without:.2f}x | append {self.append * 1000:.1f} ms per run, '
            f'{self.append / added if added > 0 else float("nan"):.0%} of the {added * 1000:.1f} ms added'
        )

    def describe_floor(self) -> str:
        return (
            f'  {self.backend:10} {FLOOR_LABEL} {self.floor * 1000:6.1f} ms | {FLOOR_LABEL}/without '
            f'{self.floor / self.without:.2f}x, the least any store could add | with/{FLOOR_LABEL} '
            f'{self.with_ / self.floor:.2f}x'
        )


def summary(results: dict[str, list[dict[str, Cell]]]) -> list[Summary]:
    rows = []
    for backend, rounds in results.items():
        rows.append(
            Summary(
                backend=backend,
                without=statistics.median(statistics.median(cells['without'].cpu) for cells in rounds),
                with_=statistics.median(statistics.median(cells['with'].cpu) for cells in rounds),
                append=statistics.median(cells['with'].append_seconds / len(cells['with'].cpu) for cells in rounds),
                floor=statistics.median(statistics.median(cells[FLOOR_LABEL].cpu) for cells in rounds),
            )
        )
    return rows


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--runs', type=int, default=200, help='agent runs per variant per round (default 200)')
    parser.add_argument('--rounds', type=int, default=3, help='rounds, alternating which variant goes first')
    parser.add_argument('--warmup', type=int, default=10, help='untimed runs of each variant first (default 10)')
    parser.add_argument(
        '--backends',
        default=','.join(BACKENDS),
        type=lambda text: [name.strip() for name in text.split(',') if name.strip()],
        help='comma-separated: sqlite, postgresql (default both)',
    )
    parser.add_argument('--postgres', default=DEFAULT_POSTGRES_URL, help='PostgreSQL database to make a schema in')
    parser.add_argument('--profile-runs', type=int, default=100, help='profiled runs per backend (0: no profile)')
    parser.add_argument('--top', type=int, default=15, help='functions in each profile summary')
    args = parser.parse_args(argv)
    unknown = [name for name in args.backends if name not in BACKENDS]
    if unknown or not args.backends:
        parser.error(f'--backends: unknown {", ".join(unknown) or "(none)"}; choose from {", ".join(BACKENDS)}')
    for name in ('runs', 'rounds'):
        if getattr(args, name) < 1:
            parser.error(f'--{name} must be at least 1')
    return args


async def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    print(header())
    print(
        'process CPU per agent.run (4 model requests, 8 messages, no model latency), ms: '
        f'median (mean) of {args.runs} runs per cell',
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix='step-cost-') as tmp:
        (Path(tmp) / 'profile').mkdir()
        results = await measure(args, Path(tmp))
        rows = summary(results)
        print('\nmedian over rounds (target: with at most 1.5x without)')
        for row in rows:
            print(row.describe())
        for row in rows:
            print(row.describe_floor())
        if args.profile_runs:
            for backend in args.backends:
                print(f'\nwhere the write goes, {backend}: {args.profile_runs} runs with persistence, thread CPU')
                print(await profile(backend, args, Path(tmp)), flush=True)


if __name__ == '__main__':
    asyncio.run(main())
