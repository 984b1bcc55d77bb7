"""Many writers of one store: agent steps per second with N processes, one tenant against a tenant each.

    .venv/bin/python scripts/bench_writers.py --compare postgresql://postgres@127.0.0.1:5432/test
    .venv/bin/python scripts/bench_writers.py --writers 1,2,4,8 --seconds 20 --rounds 2 [--compare URL]

A script that prints numbers, never a timed test.

Each writer is a process of its own that appends agent steps (4 messages of 20-120 words: a user
prompt, a tool call, its return and an answer) through the public `append`, one step at a time, to
conversations of its own, for `--seconds` after all writers are ready. A layout is a number of
writers and how they share tenants: `one tenant` (all with scope `None`, what the stock worker and
`RecallPlugin` use) or `a tenant each`. Every layout gets a fresh store: a PostgreSQL schema of its
own in the database `--compare` names (dropped afterwards), or without `--compare` a fresh SQLite
file. Layouts run interleaved, round after round, so the machine's noise falls on all of them alike.

Prints, per layout and round: steps/s over all writers, the p50 and p99 of one step's `append`, and
the errors raised by name (a writer that meets an error counts it and goes on with its next step).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'src'))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for bench/

from bench._scale_corpus import Corpus
from bench._scale_engines import drop_schema, with_schema
from pydantic_ai import messages as m

from temporal_recall.content import content_hash
from temporal_recall.store import AppendRequest, open_store

CONVERSATIONS_PER_WRITER = 4
MIN_WORDS, MAX_WORDS = 20, 120


@dataclass(frozen=True)
class Layout:
    writers: int
    shared_tenant: bool

    @property
    def name(self) -> str:
        if self.writers == 1:
            return '1 writer'
        return f'{self.writers} writers, {"one tenant" if self.shared_tenant else "a tenant each"}'


@dataclass
class WriterResult:
    steps: int = 0
    latencies_ms: list[float] = field(default_factory=list[float])
    errors: Counter[str] = field(default_factory=Counter[str])


def _step(corpus: Corpus, rng: Any, number: int) -> list[m.ModelMessage]:
    def text() -> str:
        words = rng.randint(MIN_WORDS, MAX_WORDS)
        return ' '.join(rng.choices(corpus.vocabulary, cum_weights=corpus.cumulative, k=words))

    call_id = f'call-{number}'
    return [
        m.ModelRequest(parts=[m.UserPromptPart(text())]),
        m.ModelResponse(parts=[m.ToolCallPart('lookup', {'query': text()}, tool_call_id=call_id)]),
        m.ModelRequest(parts=[m.ToolReturnPart('lookup', text(), tool_call_id=call_id)]),
        m.ModelResponse(parts=[m.TextPart(text())]),
    ]


async def _write(url: str, writer: int, scope: str | None, ready: Any, go: Any, seconds: float) -> WriterResult:
    import random

    corpus = Corpus(seed=7, messages=100)
    rng = random.Random(writer)
    result = WriterResult()
    histories: dict[str, list[m.ModelMessage]] = {}
    async with await open_store(url) as store:
        ready.release()
        await asyncio.to_thread(go.wait)
        end = time.monotonic() + seconds
        number = 0
        while time.monotonic() < end:
            conversation = f'w{writer}-c{number % CONVERSATIONS_PER_WRITER}'
            history = histories.setdefault(conversation, [])
            messages = _step(corpus, rng, number)
            started = time.perf_counter()
            try:
                await store.append(
                    AppendRequest(
                        conversation_id=conversation,
                        scope=scope,
                        idempotency_key=f'w{writer}-step-{number}',
                        base_length=len(history),
                        base_hash=content_hash(history[-1]) if history else None,
                        messages=messages,
                    )
                )
            except Exception as error:  # counted and reported: errors are part of what this measures
                result.errors[type(error).__name__] += 1
            else:
                result.latencies_ms.append((time.perf_counter() - started) * 1000)
                result.steps += 1
                history.extend(messages)
            number += 1
    return result


def _writer_process(url: str, writer: int, scope: str | None, ready: Any, go: Any, seconds: float, out: Any) -> None:
    out.put(asyncio.run(_write(url, writer, scope, ready, go, seconds)))


@dataclass(frozen=True)
class Measured:
    layout: Layout
    round: int
    steps_per_second: float
    p50_ms: float
    p99_ms: float
    errors: Counter[str]


def _percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float('nan')
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def _fresh_store(postgres: str | None, folder: Path) -> tuple[str, str | None]:
    """A URL of a new, empty store, and the PostgreSQL schema to drop afterwards."""
    if postgres is None:
        return f'sqlite:///{folder / f"writers-{uuid.uuid4().hex}.db"}', None
    schema = f'bench_writers_{uuid.uuid4().hex[:12]}'
    url = with_schema(postgres, schema)
    async with await open_store(url):  # created (and migrated) once, before the writers race to open it
        pass
    return url, schema


async def run_layout(layout: Layout, round_: int, postgres: str | None, folder: Path, seconds: float) -> Measured:
    url, schema = await _fresh_store(postgres, folder)
    context = multiprocessing.get_context('spawn')
    ready, go, out = context.Semaphore(0), context.Event(), context.Queue()
    processes = [
        context.Process(
            target=_writer_process,
            args=(url, writer, None if layout.shared_tenant else f'tenant-{writer}', ready, go, seconds, out),
        )
        for writer in range(layout.writers)
    ]
    try:
        for process in processes:
            process.start()
        for _ in processes:
            await asyncio.to_thread(ready.acquire)
        go.set()
        results: list[WriterResult] = [await asyncio.to_thread(out.get) for _ in processes]
        for process in processes:
            await asyncio.to_thread(process.join)
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
        if schema is not None and postgres is not None:
            await drop_schema(postgres, schema)
    latencies = [latency for result in results for latency in result.latencies_ms]
    return Measured(
        layout=layout,
        round=round_,
        steps_per_second=sum(result.steps for result in results) / seconds,
        p50_ms=statistics.median(latencies) if latencies else float('nan'),
        p99_ms=_percentile(latencies, 0.99),
        errors=sum((result.errors for result in results), Counter[str]()),
    )


def layouts(writer_counts: list[int]) -> list[Layout]:
    found: list[Layout] = []
    for count in writer_counts:
        found.append(Layout(count, shared_tenant=True))
        if count > 1:
            found.append(Layout(count, shared_tenant=False))
    return found


def _row(measured: Measured) -> str:
    errors = ', '.join(f'{name} {count}' for name, count in sorted(measured.errors.items())) or '0'
    return (
        f'| {measured.layout.name} | {measured.round} | {measured.steps_per_second:.1f} | '
        f'{measured.p50_ms:.0f} / {measured.p99_ms:.0f} ms | {errors} |'
    )


async def main(args: argparse.Namespace) -> None:
    counts = [int(count) for count in args.writers.split(',')]
    backend = 'PostgreSQL' if args.compare else 'SQLite'
    print(f'{backend}: {args.seconds:g} s per layout, {args.rounds} rounds, layouts interleaved', flush=True)
    print('| layout | round | steps/s | step p50 / p99 | errors |')
    print('|---|---:|---:|---:|---|')
    measured: list[Measured] = []
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(1, args.rounds + 1):
            for layout in layouts(counts):
                result = await run_layout(layout, round_, args.compare, Path(folder), args.seconds)
                measured.append(result)
                print(_row(result), flush=True)
    largest = max(counts)
    if largest > 1:
        shared = [r.steps_per_second for r in measured if r.layout == Layout(largest, True)]
        apart = [r.steps_per_second for r in measured if r.layout == Layout(largest, False)]
        shared_p99 = [r.p99_ms for r in measured if r.layout == Layout(largest, True)]
        apart_p99 = [r.p99_ms for r in measured if r.layout == Layout(largest, False)]
        print(
            f'at {largest} writers, one tenant / a tenant each: steps/s {statistics.mean(shared):.1f} / '
            f'{statistics.mean(apart):.1f} ({statistics.mean(shared) / statistics.mean(apart):.2f}x), p99 '
            f'{statistics.mean(shared_p99):.0f} / {statistics.mean(apart_p99):.0f} ms '
            f'({statistics.mean(shared_p99) / statistics.mean(apart_p99):.2f}x)'
        )


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--writers', default='1,2,4,8', help='writer counts, comma-separated')
    parser.add_argument('--seconds', type=float, default=20.0, help='how long each layout writes')
    parser.add_argument('--rounds', type=int, default=2)
    parser.add_argument('--compare', metavar='POSTGRESQL_URL', help='the PostgreSQL database to write to')
    asyncio.run(main(parser.parse_args()))
