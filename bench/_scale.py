"""Issue 18's measurement: fill every engine with the same corpus, then time the same queries on each.

The fill is interleaved: each hundred messages is generated once and written to ours and FTS5 in
turn (the first engine rotating), so a busy machine's slow minutes land on all engines alike and
the generator never holds more than one hundred messages. Only `write` is timed (the engine's own
work); generating and preparing the texts is not. Each engine's fill rate is kept per tenth of the
fill, with this process's resident memory at the end of each tenth.

tantivy is filled afterwards, in a pass of its own over the same corpus. Its writer indexes on
threads of its own: `add_document` only queues the document, and the indexing and merging run
while the caller goes on. Interleaved, those threads ran during the other engines' timed writes on
this 2-core machine: ours measured 760 msg/s at 100,000 messages beside tantivy and 1,311 without
it, while tantivy's own time was mostly the queueing. Alone, its timed writes, commits at each
tenth and the final wait for its merges cover all of its work, and nothing else runs meanwhile.

The queries are interleaved the same way, query by query across all searches (ours on each backend,
FTS5 OR and AND, tantivy), then the one-conversation queries across ours.

Each time is also taken as this process's CPU time (`time.process_time`): on a busy machine the
wall clock includes waiting for a core and the CPU time does not. It counts SQLite's and tantivy's
work (they run in this process) but not a PostgreSQL server's.

Memory: `peak RSS` is `resource.getrusage(RUSAGE_SELF).ru_maxrss`, the peak resident memory of this
process, which holds ours on SQLite (its connection thread), FTS5, tantivy's writer (a 50 MB heap)
and the generator together; a PostgreSQL server's memory is its own and not counted. The RSS column
of the fill table is `/proc/self/statm` at the end of each tenth: flat when every engine's memory is
bounded. Run with `--engines ours` to see ours alone.

Each search's own memory is measured after the timed queries, one search at a time (`search_memory`):
Linux's peak resident memory (`VmHWM`) is reset (`/proc/self/clear_refs`), the search runs the first
`MEMORY_QUERIES` queries of each class, and the new peak is read, beside the resident memory before.
The difference is what that search took at most above what the process already held (its caches
included); the engines share one process, so only that difference is the search's own.
"""

from __future__ import annotations

import math
import resource
import time
import uuid
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

from bench._scale_corpus import LONG_CONVERSATION, Corpus, IdSample, queries
from bench._scale_engines import (
    EVERY_POSTING,
    Engine,
    Fts5,
    Ours,
    Search,
    Tantivy,
    drop_schema,
    vacuum_schema,
    with_schema,
)

TENTHS = 10


@dataclass
class Fill:
    seconds: list[float] = field(default_factory=lambda: [0.0] * TENTHS)
    messages: list[int] = field(default_factory=lambda: [0] * TENTHS)
    cpu_seconds: float = 0.0
    """This process's CPU time during the writes (a PostgreSQL server's is not counted)."""
    bytes: int = 0

    def rate(self, tenth: int) -> float | None:
        return self.messages[tenth] / self.seconds[tenth] if self.seconds[tenth] else None

    @property
    def overall(self) -> float:
        return sum(self.messages) / sum(self.seconds)

    @property
    def overall_cpu(self) -> float:
        return sum(self.messages) / self.cpu_seconds if self.cpu_seconds else math.inf

    @property
    def first_and_last(self) -> tuple[float, float]:
        rates = [rate for tenth in range(TENTHS) if (rate := self.rate(tenth)) is not None]
        return rates[0], rates[-1]


@dataclass
class Measurement:
    messages: int
    long_messages: int
    fills: dict[str, Fill] = field(default_factory=dict[str, Fill])
    fill_engine: dict[str, str] = field(default_factory=dict[str, str])
    """Which engine's fill a search label reads (FTS5 OR and FTS5 AND share one)."""
    rss: list[int | None] = field(default_factory=lambda: [None] * TENTHS)
    peak_rss: int = 0
    scope: dict[str, dict[str, list[float]]] = field(default_factory=dict[str, dict[str, list[float]]])
    """Per search label, per query class, the latencies in seconds."""
    scope_cpu: dict[str, list[float]] = field(default_factory=dict[str, list[float]])
    """Per search label, this process's CPU time of each query (seconds), all classes."""
    conversation: dict[str, list[float]] = field(default_factory=dict[str, list[float]])
    rare_id_disagreements: int = 0
    rare_id_queries: int = 0
    pruned_disagreements: int = 0
    """Queries whose pruned hits (ours) differ from those of the same store reading every posting."""
    pruned_queries: int = 0
    search_rss: dict[str, tuple[int, int]] = field(default_factory=dict[str, tuple[int, int]])
    """Per search label, this process's resident bytes before its memory pass and its peak during it."""
    skipped: list[str] = field(default_factory=list[str])


def resident_bytes() -> int | None:
    """This process's resident memory now (Linux `/proc/self/statm`), or None elsewhere."""
    try:
        pages = int(Path('/proc/self/statm').read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return pages * resource.getpagesize()


MEMORY_QUERIES = 20
"""The queries of each class a search's memory pass runs (`search_memory`)."""


def reset_peak() -> bool:
    """Reset this process's peak resident memory (`VmHWM`) to its present size: False where Linux's
    `/proc/self/clear_refs` is missing or refuses."""
    try:
        Path('/proc/self/clear_refs').write_text('5')
    except OSError:
        return False
    return True


def peak_bytes() -> int | None:
    """This process's peak resident memory since its last `reset_peak` (`VmHWM`), or None elsewhere."""
    try:
        status = Path('/proc/self/status').read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith('VmHWM:'):
            return int(line.split()[1]) * 1024
    return None


def rate_text(value: float | None) -> str:
    return '—' if value is None else f'{value:,.0f}'


async def fill(
    corpus: Corpus,
    engines: list[Engine],
    measured: Measurement,
    ids: IdSample | None,
    progress: Callable[[str], None] | None = None,
) -> None:
    """Write every unit to every engine of `engines`, interleaved; `progress` gets a line at the end of
    each tenth. `ids` samples the corpus's rare ids (`None` on a second pass over the same corpus)."""
    units = corpus.units
    for engine in engines:
        measured.fills[engine.name] = Fill()
    for unit in corpus:
        tenth = unit.number * TENTHS // units
        if ids is not None:
            ids.add(unit)
        last_of_tenth = unit.number == units - 1 or (unit.number + 1) * TENTHS // units != tenth
        shift = unit.number % len(engines)
        for engine in engines[shift:] + engines[:shift]:
            prepared = engine.prepare(unit)
            started, started_cpu = time.perf_counter(), time.process_time()
            await engine.write(prepared)
            if last_of_tenth:
                await engine.tenth_done()
            if unit.number == units - 1:
                await engine.finish()
            measured.fills[engine.name].seconds[tenth] += time.perf_counter() - started
            measured.fills[engine.name].cpu_seconds += time.process_time() - started_cpu
            measured.fills[engine.name].messages[tenth] += len(unit.texts)
        if last_of_tenth:
            if ids is not None:  # The first pass's memory: the engines filled side by side.
                measured.rss[tenth] = resident_bytes()
            if progress is not None:
                rates = ', '.join(f'{name} {rate_text(fill.rate(tenth))}' for name, fill in measured.fills.items())
                progress(f'fill tenth {tenth + 1}/{TENTHS} ({unit.number + 1:,} of {units:,} hundreds): {rates} msg/s')
    for engine in engines:
        measured.fills[engine.name].bytes = await engine.bytes()


async def time_queries(
    corpus: Corpus, engines: list[Engine], ours: list[Ours], measured: Measurement, ids: IdSample, per_class: int
) -> None:
    searches: list[tuple[str, Search]] = [(label, run) for engine in engines for label, run in engine.searches.items()]
    for engine in engines:
        for label in engine.searches:
            measured.fill_engine[label] = engine.name
            measured.scope[label] = {}
    for number, (kind, terms) in enumerate(queries(corpus, ids.ids, per_class, corpus.seed)):
        shift = number % len(searches)
        answers: list[set[tuple[str, int]]] = []
        ranked: dict[str, list[tuple[str, int]]] = {}
        for label, run in searches[shift:] + searches[:shift]:
            started, started_cpu = time.perf_counter(), time.process_time()
            hits = await run(terms)
            measured.scope[label].setdefault(kind, []).append(time.perf_counter() - started)
            measured.scope_cpu.setdefault(label, []).append(time.process_time() - started_cpu)
            answers.append(set(hits))
            ranked[label] = list(hits)
        for label in (label for label in ranked if label + EVERY_POSTING in ranked):
            measured.pruned_queries += 1
            measured.pruned_disagreements += ranked[label] != ranked[label + EVERY_POSTING]
        if kind == 'rare id':
            measured.rare_id_queries += 1
            measured.rare_id_disagreements += any(answer != answers[0] for answer in answers)
    if ours:
        for number, (_kind, terms) in enumerate(queries(corpus, ids.long or ids.ids, per_class, corpus.seed + 1)):
            shift = number % len(ours)
            for engine in ours[shift:] + ours[:shift]:
                started = time.perf_counter()
                await engine.search_conversation(terms, LONG_CONVERSATION)
                measured.conversation.setdefault(engine.name, []).append(time.perf_counter() - started)
    await search_memory(searches, measured, queries(corpus, ids.ids, min(per_class, MEMORY_QUERIES), corpus.seed))


async def search_memory(
    searches: list[tuple[str, Search]], measured: Measurement, asked: list[tuple[str, list[str]]]
) -> None:
    """Each search's peak resident memory over `asked`, one search at a time, beside the memory before it
    (see the module notes); nothing where this system cannot reset the peak."""
    for label, run in searches:
        before = resident_bytes()
        if before is None or not reset_peak():
            return
        for _kind, terms in asked:
            await run(terms)
        peak = peak_bytes()
        if peak is not None:
            measured.search_rss[label] = (before, max(peak, before))


@dataclass
class Options:
    messages: int
    ours: list[str]
    """`sqlite` and/or `postgresql://` URLs."""
    directory: Path
    """Where the SQLite files and the tantivy index go."""
    seed: int = 7
    queries_per_class: int = 100
    fts5: bool = True
    tantivy: bool = True
    vacuum: bool = False
    keep: bool = False
    every_posting: bool = False
    """Also time ours reading every posting (`EVERY_POSTING`), query by query beside the pruned search."""
    progress: Callable[[str], None] | None = None
    """Where a line goes at each tenth of the fill (a long run shows it is moving)."""


def _label(store: str) -> str:
    return 'ours, SQLite' if store == 'sqlite' else 'ours, PostgreSQL'


async def measure(options: Options) -> Measurement:
    """Fill fresh engines with `options.messages` messages and time the queries; drops what it created."""
    from bench._scale_engines import tantivy_missing

    corpus = Corpus(options.seed, options.messages)
    measured = Measurement(options.messages, corpus.long_units * 100)
    async with AsyncExitStack() as stack:
        ours: list[Ours] = []
        schemas: list[tuple[str, str]] = []
        for store in options.ours:
            if store == 'sqlite':
                url = str(options.directory / 'ours.db')
            else:
                schema = f'bench_{uuid.uuid4().hex[:12]}'
                schemas.append((store, schema))
                if options.keep:
                    stack.callback(print, f'kept schema {schema}')
                else:
                    stack.push_async_callback(drop_schema, store, schema)
                url = with_schema(store, schema)
            engine = await Ours.open(url, _label(store), every_posting=options.every_posting)
            stack.push_async_callback(engine.close)
            ours.append(engine)
        engines: list[Engine] = [*ours]
        if options.fts5:
            fts5 = Fts5(options.directory / 'fts5.db')
            stack.push_async_callback(fts5.close)
            engines.append(fts5)
        ids = IdSample(seed=options.seed)
        await fill(corpus, engines, measured, ids, options.progress)
        if options.tantivy:
            if (why := tantivy_missing()) is None:
                (options.directory / 'tantivy').mkdir()
                tantivy = Tantivy(options.directory / 'tantivy')
                await fill(corpus, [tantivy], measured, None, options.progress)  # Alone: see the module doc.
                engines.append(tantivy)
            else:
                measured.skipped.append(why)
        if options.vacuum:
            for store, schema in schemas:
                await vacuum_schema(store, schema)
        await time_queries(corpus, engines, ours, measured, ids, options.queries_per_class)
    measured.peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    return measured
