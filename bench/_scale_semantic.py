"""Recall by meaning at scale (issue 51, item 2): `bench_search.py --messages N --semantic`.

One SQLite store holds the scale corpus (`bench/_scale_corpus.py`: N messages, 100 per conversation,
one tenant), written with 100-message appends and then embedded by `recall reindex --embeddings`'s
path (`reembed_store`, the local model of the `semantic` extra). Both are timed. `--semantic-store
PATH` keeps the filled store there, and a later run with the same path and size reuses it.

Then the searching, each time in a fresh process (`bench/_semantic_probe.py`), so its memory is its
own: the resident memory before the first search and the peak after the last, the cold first
search (the tenant's vectors read into memory), and p50/p95 of `--queries` scope-wide searches by
meaning (wall clock and process CPU). `--before-src DIR` measures another checkout's `src` on the
same store in the same way, alternating with this one `--rounds` times.

Recall@10: each probe also returns the ten nearest documents of each query (`nearest`, untimed),
compared with the exact ranking computed here from every stored vector (int8 components times
scale, as stored), the share of the exact ten it found, averaged over the queries.
"""

from __future__ import annotations

import json
import math
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench._scale_corpus import Corpus, IdSample, queries
from bench._scale_engines import SCOPE, Ours
from bench._scale_report import percentile

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Options:
    messages: int
    seed: int
    queries: int
    store: Path
    before_src: Path | None
    rounds: int
    progress: Callable[[str], None]


async def _fill(options: Options) -> list[str]:
    """Write and embed the corpus unless `options.store` holds it; the query texts either way."""
    from temporal_recall.embeddings import LOCAL_MODEL, as_embedder
    from temporal_recall.embeddings._index import reembed_store

    corpus = Corpus(seed=options.seed, messages=options.messages)
    marker = options.store.with_suffix('.filled')
    ids = IdSample(size=1000, seed=options.seed)
    filled = marker.exists() and marker.read_text() == f'{options.messages}/{options.seed}'
    if not filled:
        options.store.unlink(missing_ok=True)
        ours = await Ours.open(str(options.store), 'ours')
        try:
            started = time.perf_counter()
            for unit in corpus:
                ids.add(unit)
                await ours.write(ours.prepare(unit))
                if (unit.number + 1) % max(1, corpus.units // 10) == 0:
                    options.progress(f'  filled {(unit.number + 1) * 100:,} messages')
            written = time.perf_counter() - started
            options.progress(f'  fill: {options.messages / written:,.0f} messages/s')
            embedder = as_embedder(LOCAL_MODEL)
            started = time.perf_counter()
            tenths: list[int] = []

            def update(done: int, total: int) -> None:
                tenth = done * 10 // max(total, 1)
                if tenth not in tenths:
                    tenths.append(tenth)
                    options.progress(f'  embedded {done:,} of {total:,} documents')

            count = await reembed_store(ours.store, embedder, update)
            seconds = time.perf_counter() - started
            print(f'filled {options.messages:,} messages at {options.messages / written:,.0f} messages/s; '
                  f'embedded {count:,} documents at {count / seconds:,.0f} documents/s', flush=True)  # fmt: skip
        finally:
            await ours.store.close()
        marker.write_text(f'{options.messages}/{options.seed}')
    else:
        for unit in corpus:
            ids.add(unit)
        print(f'reusing the filled store at {options.store}', flush=True)
    return [' '.join(terms) for _, terms in queries(corpus, ids.ids, math.ceil(options.queries / 3), options.seed)][
        : options.queries
    ]


def _exact_nearest(store: Path, vectors: list[list[float]]) -> list[list[int]]:
    """The ten documents of the tenant nearest each query vector over every stored vector, in key order for ties."""
    with closing(sqlite3.connect(f'file:{store}?mode=ro', uri=True)) as db:
        rows = db.execute(
            'SELECT d.doc_id, v.vector, v.scale FROM document_vectors v '
            'JOIN documents d ON d.tenant_id = v.tenant_id AND d.content_hash = v.content_hash AND d.role = v.role '
            'WHERE v.tenant_id = (SELECT tenant_id FROM tenants WHERE scope_key = ?) ORDER BY v.vector_key',
            ('s:' + SCOPE,),
        ).fetchall()
    doc_ids = np.array([row[0] for row in rows], dtype=np.int64)
    matrix = np.frombuffer(b''.join(row[1] for row in rows), dtype=np.int8).reshape(len(rows), -1)
    scales = np.array([row[2] for row in rows], dtype=np.float32)
    del rows
    best: list[list[int]] = []
    queries_matrix = np.asarray(vectors, dtype=np.float32)
    scores = np.zeros((len(doc_ids), len(vectors)), dtype=np.float32)
    for start in range(0, len(doc_ids), 65_536):
        chunk = matrix[start : start + 65_536].astype(np.float32) * scales[start : start + 65_536, None]
        scores[start : start + 65_536] = chunk @ queries_matrix.T
    for column in range(len(vectors)):
        order = np.argsort(-scores[:, column], kind='stable')[:10]
        best.append(doc_ids[order].tolist())
    return best


def _probe(options: Options, texts_file: Path, src: Path | None) -> dict[str, Any]:
    command = [sys.executable, '-m', 'bench._semantic_probe', str(options.store), str(texts_file), '--scope', SCOPE]
    if src is not None:
        command += ['--src', str(src)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f'the probe failed ({done.returncode}):\n{done.stderr[-4000:]}')
    return json.loads(done.stdout.strip().splitlines()[-1])


async def measure(options: Options) -> None:
    texts = await _fill(options)
    texts_file = options.store.with_suffix('.queries.json')
    texts_file.write_text(json.dumps(texts))
    variants: list[tuple[str, Path | None]] = [('this checkout', None)]
    if options.before_src is not None:
        variants.append((f'before ({options.before_src})', options.before_src))
    exact: list[list[int]] | None = None
    print(
        f'{options.messages:,} messages, {len(texts)} scope-wide searches by meaning per probe, SQLite\n'
        '| code | round | p50 / p95 ms | cpu p50 / p95 ms | cold first search ms | RSS before, MB | '
        'peak RSS − before, MB | recall@10 vs exact |\n|---|---|---|---|---|---|---|---|',
        flush=True,
    )
    for round_number in range(options.rounds):
        order = variants if round_number % 2 == 0 else list(reversed(variants))
        for label, src in order:
            result = _probe(options, texts_file, src)
            if exact is None:
                exact = _exact_nearest(options.store, result['query_vectors'])
            recall = statistics.fmean(
                len(set(found) & set(wanted)) / max(1, len(wanted))
                for found, wanted in zip(result['nearest'], exact, strict=True)
            )
            wall, cpu = result['wall_seconds'], result['cpu_seconds']
            grown = (result['peak_kib'] - result['rss_before_kib']) / 1024
            print(
                f'| {label} | {round_number + 1} | {percentile(wall, 0.5):.1f} / {percentile(wall, 0.95):.1f} | '
                f'{percentile(cpu, 0.5):.1f} / {percentile(cpu, 0.95):.1f} | {result["cold_ms"]:,.0f} | '
                f'{result["rss_before_kib"] / 1024:,.0f} | {grown:,.0f} | '
                f'{recall:.3f} |',
                flush=True,
            )
