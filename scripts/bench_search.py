"""Search latency and index size at 1k, 10k and 100k stored messages, or at scale against FTS5 and tantivy.

    .venv/bin/python scripts/bench_search.py [--sizes 1000,10000,100000] [--store sqlite|postgresql://...]
    .venv/bin/python scripts/bench_search.py --compare postgresql://postgres@127.0.0.1:5432/test
    .venv/bin/python scripts/bench_search.py --messages 1000000 [--compare postgresql://...] [--per-class 100]

A script that prints numbers, never a timed test.

`--messages N` is issue 18's measurement (`bench/_scale*.py`): N messages of 20-300 words in
N/100 conversations of one tenant, written through the public `append` (one 100-message append per
conversation) to ours (SQLite, and PostgreSQL with `--compare`) and the same texts to SQLite FTS5,
interleaved, then to tantivy alone (its writer indexes on threads of its own, which would run during
the others' timed writes); then the same queries on each, interleaved query by query (one rare id;
two to four common words; a rare id among common words), scope-wide and, for ours, inside one
1,000-message conversation. It prints the fill rate per tenth of the fill, bytes per message,
peak memory (`ru_maxrss`), p50/p95/p99/max per class, a table shaped like the issue's, and the
issue's thresholds as PASS/FAIL lines. `--engines ours` fills ours alone (its memory on its own).
It records each engine's p50 over all queries in `docs/search_p50.json` and redraws
`docs/search_p50.svg`, search p50 against store size from every recorded run (`bench/_chart.py`;
`--no-record` leaves both alone, `--chart` only redraws).
tantivy is a bench-only extra, never a product dependency: `.venv/bin/pip install -e '.[bench]'`
(`./scripts/bootstrap` installs it); without it the tantivy row is skipped with a message.

Without `--messages`, the sizes of `--sizes` as follows.

Generates conversations of realistic text (a Zipf-distributed vocabulary plus rare identifiers:
ticket ids, order numbers, file paths), writes them the way the persistence capability does (a
delta at every step boundary, one `append` per step, sequentially), then times one- to three-term
queries: in scope `all` over the whole store, and inside one 1,000-message conversation. Prints
p50/p95 and database bytes per message.

Each latency is also given as the p50 of the CPU time the process spent (`cpu p50`): on a shared,
busy machine the wall clock includes waiting for a core, the CPU time does not.

Then it fills a SQLite store with a CJK-heavy corpus (`--cjk-messages`, Japanese, Chinese and
Korean text with a few Latin identifiers, the same shape of conversation) and prints the bytes the
search index takes per message: CJK text is indexed as characters and character pairs, so it costs
more index per message than English does, and the target is to stay under 4 KB.

`--semantic` measures recall by meaning instead, at each size of `--sizes` on SQLite: two stores
filled with the same conversations, alternating conversation by conversation, one without an
embedder and one with the local model of the `semantic` extra (`embedded_append`, the write path the
capability uses); it prints each one's fill rate and database bytes per message, then, on the
store with vectors, the scope-wide and one-conversation latencies of bm25, semantic and hybrid
searches, alternating query by query, with the process CPU time beside the wall clock (the first
semantic search of a tenant reads its vectors into memory: shown apart as the cold read).
`--messages N --semantic` is issue 51's: one store of the scale corpus, embedded, searched by meaning
scope-wide in fresh processes with their memory and recall@10 against the exact ranking, and with
`--before-src DIR` another checkout's code on the same store, alternately (`bench/_scale_semantic.py`).

Every size gets a fresh store: a new SQLite file, or a new PostgreSQL schema (`bench_<hex>`, dropped
afterwards unless `--keep`) in the database the URL names. `--compare URL` runs SQLite and that
PostgreSQL database on the same generated workload (same seed) and prints them side by side; the
queries are the same on both, so the latencies compare like for like. `--vacuum` runs
`VACUUM ANALYZE` on the PostgreSQL schema between the fill and the queries: what autovacuum does
soon after a bulk of writes on a server where it is on (without statistics and a visibility map,
PostgreSQL's index-only scans also read the table).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'src'))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for bench/

from bench._scale_engines import drop_schema, search_index, vacuum_schema, with_schema
from bench._workload import Generator
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from bench import _chart, _provenance, _scale, _scale_report, _scale_semantic
from temporal_recall.content import content_hash
from temporal_recall.embeddings import LOCAL_MODEL, as_embedder
from temporal_recall.embeddings._index import embedded_append
from temporal_recall.models import SearchRequest
from temporal_recall.store import AppendRequest, SqliteConversationStore, open_store

MESSAGES_PER_CONVERSATION = 100
STEP_MESSAGES = 4  # user prompt, tool call, tool return, answer: one step boundary's worth


class Workload(Generator):
    """`python -m bench`'s text generator (Zipf vocabulary, rare identifiers), as pydantic-ai messages."""

    @classmethod
    def create(cls, seed: int) -> Workload:
        return cls(seed)

    def step(self, index: int) -> list[ModelMessage]:
        call_id = f'call-{index}'
        return [
            ModelRequest(parts=[UserPromptPart(self.sentence(self.rng.randint(8, 40)))]),
            ModelResponse(parts=[ToolCallPart('lookup', {'q': self.sentence(3)}, tool_call_id=call_id)]),
            ModelRequest(
                parts=[ToolReturnPart('lookup', self.sentence(self.rng.randint(20, 80)), tool_call_id=call_id)]
            ),
            ModelResponse(parts=[TextPart(self.sentence(self.rng.randint(10, 60)))]),
        ]

    def query(self) -> str:
        words = self.words(self.rng.randint(1, 3), top=2000)
        if self.identifiers and self.rng.random() < 0.5:
            words[-1] = self.rng.choice(self.identifiers)
        return ' '.join(words)


async def fill(store, workload: Workload, *, conversation_id: str, messages: int, scope: str | None) -> None:
    history: list[ModelMessage] = []
    for step in range(messages // STEP_MESSAGES):
        new = workload.step(step)
        await store.append(
            AppendRequest(
                conversation_id=conversation_id,
                scope=scope,
                idempotency_key=f'bench/{conversation_id}/{step}',
                base_length=len(history),
                base_hash=content_hash(history[-1]) if history else None,
                messages=new,
                run_id=f'{conversation_id}-run-{step // 5}',
            )
        )
        history.extend(new)


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[int(len(ordered) * 0.95) - 1] * 1000


async def time_queries(store, workload: Workload, request_for, count: int) -> tuple[float, float, float]:
    """Wall-clock p50 and p95, and the p50 of the CPU time this process spent (ms).

    On a shared machine the wall clock includes waiting for a core; the process CPU time does not,
    so it shows what a query costs on an idle machine. SQLite runs in this process (its connection
    thread counts); a PostgreSQL server's own CPU time is not counted.
    """
    samples = []
    cpu = []
    for _ in range(count):
        request = request_for(workload.query())
        started, started_cpu = time.perf_counter(), time.process_time()
        await search_index(store, request)
        samples.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    return (*percentiles(samples), statistics.median(cpu) * 1000)


@dataclass
class Measured:
    backend: str
    messages: int
    write_seconds: float
    everything: tuple[float, float, float]
    one: tuple[float, float, float]
    database_bytes: int


async def bench(
    url: str, size: int, seed: int, queries: int, after_fill: Callable[[], Awaitable[None]] | None = None
) -> Measured:
    store = await open_store(url)
    try:
        workload = Workload.create(seed)
        started = time.perf_counter()
        conversations = max(1, size // MESSAGES_PER_CONVERSATION)
        for number in range(conversations - 10):
            await fill(store, workload, conversation_id=f'c{number}', messages=MESSAGES_PER_CONVERSATION, scope='bench')
        # One long conversation of 1,000 messages inside the same store.
        await fill(store, workload, conversation_id='long', messages=1_000, scope='bench')
        write_seconds = time.perf_counter() - started
        if after_fill is not None:
            await after_fill()
        stats = await store.stats()
        everything = await time_queries(
            store,
            workload,
            lambda q: SearchRequest(query=q, scope='bench', all_conversations=True, limit=10),
            queries,
        )
        one = await time_queries(
            store, workload, lambda q: SearchRequest(query=q, scope='bench', conversation_id='long', limit=10), queries
        )
        backend = 'sqlite' if isinstance(store, SqliteConversationStore) else 'postgres'
        return Measured(backend, stats.entries, write_seconds, everything, one, stats.database_bytes)
    finally:
        await store.close()


INDEX_TABLES = ('documents', 'terms', 'posting_blocks', 'term_documents', 'conversation_documents', 'occurrences')
"""The tables (with their indexes) that make up the search index, as opposed to the log."""

KANJI = [chr(0x4E00 + index) for index in range(0, 3000, 1)]
HANGUL = [chr(0xAC00 + index) for index in range(0, 11172, 5)]
JAPANESE_PARTICLES = ('の', 'は', 'が', 'を', 'に', 'で', 'と', 'も', 'から', 'まで', 'です', 'ます')
KOREAN_PARTICLES = ('는', '은', '이', '가', '를', '을', '에', '에서', '도', '입니다')


class CjkWorkload(Workload):
    """The same conversations in Japanese, Chinese and Korean, word for word: each made-up word of the
    English workload becomes a CJK word of one to three characters (1.85 on average, as Chinese and
    Japanese words run), drawn from 3,000 ideographs or 2,235 Hangul syllables. A sentence is in one
    language: Japanese puts a particle after most words and runs them together, Chinese runs the
    words together, Korean separates words by spaces with a particle attached to most. The rare
    Latin identifiers stay."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.han = {word: self._word(KANJI) for word in self.vocabulary}
        self.hangul = {word: self._word(HANGUL) for word in self.vocabulary}

    def _word(self, characters: list[str]) -> str:
        return ''.join(self.rng.choices(characters, k=self.rng.choices((1, 2, 3), weights=(30, 55, 15))[0]))

    def _particle(self, word: str, particles: tuple[str, ...]) -> str:
        return word + self.rng.choice(particles) if self.rng.random() < 0.6 else word

    def sentence(self, count: int) -> str:
        latin = super().sentence(count).split(' ')
        ids = [word for word in latin if not word.isalpha()]
        language = self.rng.randrange(3)
        words = [(self.hangul if language == 2 else self.han).get(word, word) for word in latin[:count]]
        if language == 0:
            text = ''.join(self._particle(word, JAPANESE_PARTICLES) for word in words)
        elif language == 1:
            text = ''.join(words)
        else:
            text = ' '.join(self._particle(word, KOREAN_PARTICLES) for word in words)
        return ' '.join([text, *ids])


async def cjk_index_bytes(messages: int, seed: int) -> tuple[float, float, int]:
    """Index bytes per message, and all bytes per message, of a SQLite store holding a CJK-heavy corpus."""
    import sqlite3
    from contextlib import closing

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / 'cjk.db'
        store = await open_store(str(path))
        try:
            workload = CjkWorkload.create(seed)
            for number in range(max(1, messages // MESSAGES_PER_CONVERSATION)):
                await fill(
                    store, workload, conversation_id=f'c{number}', messages=MESSAGES_PER_CONVERSATION, scope='cjk'
                )
            stats = await store.stats()
        finally:
            await store.close()
        with closing(sqlite3.connect(path)) as db:
            db.execute('PRAGMA wal_checkpoint(TRUNCATE)')
            db.execute('VACUUM')
            owner = dict(db.execute('SELECT name, tbl_name FROM sqlite_master'))
            sizes: dict[str, int] = {}
            for name, size in db.execute('SELECT name, sum(pgsize) FROM dbstat GROUP BY name'):
                table = owner.get(name, name)
                sizes[table] = sizes.get(table, 0) + size
        index = sum(size for table, size in sizes.items() if table in INDEX_TABLES)
        return index / stats.entries, sum(sizes.values()) / stats.entries, stats.entries


def describe(row: Measured) -> str:
    return (
        f'{row.backend:>8} {row.messages:>8,} msgs | write {row.write_seconds:6.1f}s | '
        f'scope all p50 {row.everything[0]:6.2f} ms p95 {row.everything[1]:6.2f} ms '
        f'(cpu p50 {row.everything[2]:5.2f}) | '
        f'1,000-msg conversation p50 {row.one[0]:5.2f} ms p95 {row.one[1]:5.2f} ms (cpu p50 {row.one[2]:5.2f}) | '
        f'db {row.database_bytes / row.messages:,.0f} B/msg'
    )


async def fill_with(store, workload: Workload, embedder, *, conversation_id: str, messages: int) -> None:
    """`fill`, through the capability's write path with `embedder` (`None`: the plain append)."""
    history: list[ModelMessage] = []
    for step in range(messages // STEP_MESSAGES):
        new = workload.step(step)
        request = AppendRequest(
            conversation_id=conversation_id,
            scope='bench',
            idempotency_key=f'bench/{conversation_id}/{step}',
            base_length=len(history),
            base_hash=content_hash(history[-1]) if history else None,
            messages=new,
            run_id=f'{conversation_id}-run-{step // 5}',
        )
        await embedded_append(store, embedder, request, lambda request=request: store.append(request))
        history.extend(new)


async def bench_semantic(size: int, args: argparse.Namespace) -> None:
    """Fill rate and bytes per message without and with an embedder, then bm25/semantic/hybrid latencies."""
    embedder = as_embedder(LOCAL_MODEL)
    with tempfile.TemporaryDirectory() as tmp:
        plain = await open_store(str(Path(tmp) / 'plain.db'))
        meaning = await open_store(str(Path(tmp) / 'meaning.db'))
        try:
            # The same conversations on both (one generator each, same seed), alternating which goes first.
            workloads = {'plain': Workload.create(args.seed), 'meaning': Workload.create(args.seed)}
            stores = {'plain': (plain, None), 'meaning': (meaning, embedder)}
            spent = dict.fromkeys(stores, 0.0)
            conversations = [(f'c{n}', MESSAGES_PER_CONVERSATION) for n in range(max(1, size // 100) - 10)]
            for index, (conversation_id, messages) in enumerate([*conversations, ('long', 1_000)]):
                for name in sorted(stores, reverse=bool(index % 2)):
                    store, used = stores[name]
                    started = time.perf_counter()
                    await fill_with(store, workloads[name], used, conversation_id=conversation_id, messages=messages)
                    spent[name] += time.perf_counter() - started
            for name, (store, _) in stores.items():
                stats = await store.stats()
                rate, per_message = stats.entries / spent[name], stats.database_bytes / stats.entries
                print(
                    f'{"with" if name == "meaning" else "without":>7} an embedder {stats.entries:>8,} msgs | '
                    f'fill {rate:7,.0f} msgs/s | db {per_message:,.0f} B/msg',
                    flush=True,
                )
            await _time_modes(meaning, workloads['meaning'], embedder, args.queries)
        finally:
            await plain.close()
            await meaning.close()


async def _time_modes(store, workload: Workload, embedder, count: int) -> None:
    targets = {'scope all': {'all_conversations': True}, '1,000-msg conversation': {'conversation_id': 'long'}}
    started = time.perf_counter()
    await search_index(
        store, SearchRequest(query='warm', scope='bench', all_conversations=True, mode='semantic'), embedder=embedder
    )
    cold = (time.perf_counter() - started) * 1000
    print(f'   cold read of the tenant vectors (first semantic search): {cold:.0f} ms')
    for target, given in targets.items():
        samples: dict[str, list[float]] = {'bm25': [], 'semantic': [], 'hybrid': []}
        cpu: dict[str, list[float]] = {mode: [] for mode in samples}
        for number in range(count):
            query = workload.query()
            modes = list(samples) if number % 2 else list(reversed(samples))
            for mode in modes:
                request = SearchRequest(query=query, scope='bench', limit=10, mode=mode, **given)  # type: ignore[arg-type]
                began, began_cpu = time.perf_counter(), time.process_time()
                await search_index(store, request, embedder=embedder)
                samples[mode].append(time.perf_counter() - began)
                cpu[mode].append(time.process_time() - began_cpu)
        shown = ' | '.join(
            f'{mode} p50 {p50:6.2f} ms p95 {p95:6.2f} ms (cpu p50 {cpu50:5.2f} p95 {cpu95:5.2f})'
            for mode, (p50, p95), (cpu50, cpu95) in
            ((mode, percentiles(times), percentiles(cpu[mode])) for mode, times in samples.items())
        )  # fmt: skip
        print(f'   {target}: {shown}', flush=True)


async def run_one(store: str, size: int, args: argparse.Namespace) -> Measured:
    """One size on a fresh store of `store` ("sqlite" or a postgresql:// URL)."""
    if store == 'sqlite':
        with tempfile.TemporaryDirectory() as tmp:
            return await bench(str(Path(tmp) / 'bench.db'), size, args.seed, args.queries)
    schema = f'bench_{uuid.uuid4().hex[:12]}'

    async def vacuum() -> None:
        await vacuum_schema(store, schema)

    try:
        return await bench(with_schema(store, schema), size, args.seed, args.queries, vacuum if args.vacuum else None)
    finally:
        if args.keep:
            print(f'kept schema {schema}')
        else:
            await drop_schema(store, schema)


async def at_scale(args: argparse.Namespace, stores: list[str]) -> None:
    """Issue 18's measurement (`bench/_scale.py`): one corpus, every engine, interleaved."""
    engines = {name.strip() for name in args.engines.split(',')}
    unknown = engines - {'ours', 'fts5', 'tantivy'}
    if unknown:
        raise SystemExit(f'--engines: unknown {", ".join(sorted(unknown))}; choose from ours, fts5, tantivy.')
    with tempfile.TemporaryDirectory(prefix='bench-scale-') as tmp:
        options = _scale.Options(
            messages=args.messages,
            ours=stores if 'ours' in engines else [],
            directory=Path(tmp),
            seed=args.seed,
            queries_per_class=args.per_class,
            fts5='fts5' in engines,
            tantivy='tantivy' in engines,
            vacuum=args.vacuum,
            keep=args.keep,
            every_posting=args.every_posting,
            progress=lambda line: print(line, file=sys.stderr, flush=True),
        )
        measured = await _scale.measure(options)
        print(_scale_report.report(measured), flush=True)
    if not args.no_record:
        command = ' '.join(['.venv/bin/python scripts/bench_search.py', *sys.argv[1:]])
        points = _chart.points_of(
            measured.scope,
            args.messages,
            date=time.strftime('%Y-%m-%d', time.gmtime()),
            commit=_provenance.commit(),
            command=command,
        )
        redraw(_chart.record(points))


def redraw(points: list[_chart.Point]) -> None:
    why = _chart.draw(points)
    shown = _chart.CHART.relative_to(_chart.DOCS.parent)
    print(why or f'search p50 against store size: {len(points)} points in {shown}', flush=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--sizes', default='1000,10000,100000')
    parser.add_argument(
        '--messages',
        type=int,
        help="issue 18's measurement at this many messages (a multiple of 100, up to 1,000,000) instead of --sizes",
    )
    parser.add_argument(
        '--engines',
        default='ours,fts5,tantivy',
        help='with --messages: which of ours, fts5, tantivy to fill (default all; ours alone isolates its memory)',
    )
    parser.add_argument('--per-class', type=int, default=100, help='with --messages: queries per query class')
    parser.add_argument('--store', default='sqlite', help='"sqlite" (a temp file) or a postgresql:// URL')
    parser.add_argument('--compare', metavar='POSTGRESQL_URL', help='run SQLite and this PostgreSQL side by side')
    parser.add_argument('--queries', type=int, default=300)
    parser.add_argument('--seed', type=int, default=7)
    parser.add_argument('--cjk-messages', type=int, default=10_000, help='size of the CJK-heavy corpus (0: skip it)')
    parser.add_argument('--keep', action='store_true', help='keep the PostgreSQL benchmark schemas')
    parser.add_argument(
        '--every-posting',
        action='store_true',
        help='with --messages: also time ours reading every posting (the path before the top tiers), '
        'query by query beside the pruned search, and count the queries whose hits differ',
    )
    parser.add_argument(
        '--semantic', action='store_true', help='recall by meaning at each of --sizes (SQLite; see the module doc)'
    )
    parser.add_argument(
        '--semantic-store',
        type=Path,
        help='with --messages and --semantic: the SQLite file to fill, kept and reused by a later run of the same size',
    )
    parser.add_argument(
        '--before-src',
        type=Path,
        help="with --messages and --semantic: another checkout's src, measured on the same store, alternately",
    )
    parser.add_argument('--rounds', type=int, default=2, help='with --messages and --semantic: probes per checkout')
    parser.add_argument(
        '--vacuum',
        action='store_true',
        help='PostgreSQL: VACUUM ANALYZE after the fill, before timing (for servers with autovacuum off)',
    )
    parser.add_argument(
        '--no-record',
        action='store_true',
        help='with --messages: do not record the p50s in docs/search_p50.json nor redraw docs/search_p50.svg',
    )
    parser.add_argument('--chart', action='store_true', help='only redraw docs/search_p50.svg from the recorded points')
    args = parser.parse_args()
    if args.chart:
        redraw(_chart.load())
        return
    stores = ['sqlite', args.compare] if args.compare else [args.store]
    shown = ', '.join(store.split('@')[-1] for store in stores)
    print(f'cores {os.cpu_count()}, python {sys.version.split()[0]}, store {shown}')
    if args.messages is not None and args.semantic:
        await _scale_semantic.measure(
            _scale_semantic.Options(
                messages=args.messages,
                seed=args.seed,
                queries=args.queries,
                store=(args.semantic_store or Path(tempfile.mkdtemp(prefix='bench-semantic-')) / 's.db').resolve(),
                before_src=args.before_src.resolve() if args.before_src else None,
                rounds=args.rounds,
                progress=lambda line: print(line, file=sys.stderr, flush=True),
            )
        )
        return
    if args.messages is not None:
        await at_scale(args, stores)
        return
    if args.semantic:
        for size in (int(s) for s in args.sizes.split(',')):
            await bench_semantic(size, args)
        return
    for size in (int(s) for s in args.sizes.split(',')):
        for store in stores:
            print(describe(await run_one(store, size, args)), flush=True)
    if args.cjk_messages:
        index, everything, count = await cjk_index_bytes(args.cjk_messages, args.seed)
        verdict = 'under' if index < 4096 else 'OVER'
        print(
            f'CJK-heavy corpus, sqlite {count:,} msgs | search index {index:,.0f} B/msg ({verdict} the 4 KB target) | '
            f'db {everything:,.0f} B/msg',
            flush=True,
        )


if __name__ == '__main__':
    asyncio.run(main())
