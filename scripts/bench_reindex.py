"""The rate of `reindex` (messages a second) on a store filled by the per-step write, and whether it changed any hit.

    .venv/bin/python scripts/bench_reindex.py [--messages 30000] [--store sqlite|postgresql://...] [--keep DIR]

A script that prints numbers, never a timed test.

Fills a store with issue 18's corpus (`bench/_scale_corpus.py`: N messages in conversations of one
hundred, one tenant) through the public `append`, timing the fill (the per-step write's rate), then
searches a fixed set of queries, times `reindex`, searches them again and says whether every hit and
score is the same. `--store` names the backend: `sqlite` (a temporary file, or `--keep DIR`'s
`reindex-N.db`, reused when it exists, so a second run measures only the reindex) or a PostgreSQL URL
(a fresh schema `bench_reindex_<N>`, kept with `--keep`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1] / 'src'))  # after PYTHONPATH: another checkout's code
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for bench/

from bench._scale_corpus import Corpus
from bench._scale_engines import SCOPE, Ours, drop_schema, with_schema

from temporal_recall.models import SearchRequest
from temporal_recall.search.plan import search_index
from temporal_recall.store import open_store

QUERIES = 40


async def _hits(store: object, corpus: Corpus) -> list[list[tuple[str, int, float]]]:
    """The hits (conversation, position, score) of `QUERIES` queries of two to three corpus words."""
    answers: list[list[tuple[str, int, float]]] = []
    for number in range(QUERIES):
        words = corpus.vocabulary[number * 7 % 200 : number * 7 % 200 + 2 + number % 2]
        request = SearchRequest(query=' '.join(words), scope=SCOPE, all_conversations=True, limit=20)
        found = await search_index(store, request)  # type: ignore[arg-type]
        answers.append([(hit.conversation_id, hit.position, round(hit.score, 9)) for hit in found.hits])
    return answers


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--messages', type=int, default=30_000)
    parser.add_argument('--store', default='sqlite')
    parser.add_argument('--keep', type=Path, default=None, help='keep the store (SQLite: in this directory)')
    parser.add_argument('--rounds', type=int, default=1, help='reindex this many times')
    parser.add_argument('--verbose', action='store_true', help="log the store's progress")
    args = parser.parse_args()
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format='%(asctime)s %(message)s')
    corpus = Corpus(seed=18, messages=args.messages)
    schema = f'bench_reindex_{args.messages}'
    if args.store == 'sqlite':
        folder = args.keep or Path(tempfile.mkdtemp(prefix='bench-reindex-'))
        url = str(folder / f'reindex-{args.messages}.db')
        filled = Path(url).exists()
    else:
        url = with_schema(args.store, schema)
        if not args.keep:
            await drop_schema(args.store, schema)
        store = await open_store(url)
        filled = (await store.stats()).entries >= args.messages
        await store.close()
    engine = await Ours.open(url, 'ours')
    try:
        if not filled:
            started = time.perf_counter()
            for unit in corpus:
                await engine.write(engine.prepare(unit))
            took = time.perf_counter() - started
            rate = args.messages / took
            print(f'fill (100-message appends): {args.messages} messages in {took:.1f} s, {rate:,.0f} msg/s')
        before = await _hits(engine.store, corpus)
        for _ in range(args.rounds):
            started = time.perf_counter()
            documents = await engine.store.reindex()
            took = time.perf_counter() - started
            print(
                f'reindex: {args.messages} messages ({documents} documents) in {took:.1f} s, '
                f'{args.messages / took:,.0f} msg/s'
            )
        after = await _hits(engine.store, corpus)
        same = before == after
        print(f'hits after reindex: {"identical" if same else "DIFFERENT"} ({sum(map(len, before))} hits)')
        report = await engine.store.check()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        print(f'check: {len(report.findings)} findings; peak memory {peak} MB')
    finally:
        await engine.close()
        if args.store != 'sqlite' and not args.keep:
            await drop_schema(args.store, schema)


if __name__ == '__main__':
    asyncio.run(main())
