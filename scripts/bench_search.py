"""Search latency and index size at 1k, 10k and 100k stored messages (a script, not a test).

    .venv/bin/python scripts/bench_search.py [--sizes 1000,10000,100000] [--store sqlite|postgresql://...]

Generates conversations of realistic text (a Zipf-distributed vocabulary plus rare identifiers:
ticket ids, order numbers, file paths), writes them the way the persistence capability does (a
delta at every step boundary), then times one- to three-term queries: in scope `all` over the whole
store, and inside one 1,000-message conversation. Prints p50/p95 and index bytes per message.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'src'))

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from temporal_recall._recall import search_history
from temporal_recall.content import content_hash
from temporal_recall.models import SearchRequest
from temporal_recall.store import AppendRequest, open_store

VOCABULARY_SIZE = 20_000
MESSAGES_PER_CONVERSATION = 100
STEP_MESSAGES = 4  # user prompt, tool call, tool return, answer: one step boundary's worth


@dataclass
class Workload:
    rng: random.Random
    vocabulary: list[str]
    weights: list[float]
    identifiers: list[str]

    @classmethod
    def create(cls, seed: int) -> Workload:
        rng = random.Random(seed)
        syllables = ['ka', 'lo', 'mi', 'ren', 'tos', 'vu', 'ber', 'dan', 'el', 'fi', 'gor', 'hul', 'ix', 'jo', 'qua']
        vocabulary = sorted({''.join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(VOCABULARY_SIZE * 2)})
        vocabulary = vocabulary[:VOCABULARY_SIZE]
        rng.shuffle(vocabulary)
        weights = [1.0 / (rank + 1) ** 1.07 for rank in range(len(vocabulary))]
        return cls(rng=rng, vocabulary=vocabulary, weights=weights, identifiers=[])

    def sentence(self, words: int) -> str:
        text = ' '.join(self.rng.choices(self.vocabulary, weights=self.weights, k=words))
        if self.rng.random() < 0.3:
            identifier = self.rng.choice(
                [
                    f'TICKET-{self.rng.randint(1000, 99999)}',
                    f'order A-{self.rng.randint(100, 99999)}',
                    f'src/{self.rng.choice(self.vocabulary)}/{self.rng.choice(self.vocabulary)}.py',
                ]
            )
            self.identifiers.append(identifier)
            text += f' {identifier}'
        return text

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
        terms = self.rng.randint(1, 3)
        words = self.rng.choices(self.vocabulary[:2000], weights=self.weights[:2000], k=terms)
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


async def time_queries(store, workload: Workload, request_for, count: int) -> tuple[float, float]:
    samples = []
    for _ in range(count):
        request = request_for(workload.query())
        started = time.perf_counter()
        await search_history(store, request)
        samples.append(time.perf_counter() - started)
    return percentiles(samples)


async def bench(url: str, size: int, seed: int, queries: int) -> None:
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
        messages = stats.entries
        index_bytes = getattr(stats, 'index_bytes', None)
        per_message = f'{index_bytes / messages:,.0f}' if index_bytes else 'n/a'
        print(
            f'{messages:>8,} msgs | write {write_seconds:6.1f}s | scope all p50 {everything[0]:6.2f} ms '
            f'p95 {everything[1]:6.2f} ms | 1,000-msg conversation p50 {one[0]:5.2f} ms p95 {one[1]:5.2f} ms | '
            f'db {stats.database_bytes / messages:,.0f} B/msg, index {per_message} B/msg'
        )
    finally:
        await store.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--sizes', default='1000,10000,100000')
    parser.add_argument('--store', default='sqlite', help='"sqlite" (a temp file) or a postgresql:// URL')
    parser.add_argument('--queries', type=int, default=300)
    parser.add_argument('--seed', type=int, default=7)
    args = parser.parse_args()
    print(f'cores {os.cpu_count()}, python {sys.version.split()[0]}, store {args.store.split("@")[-1]}')
    for size in (int(s) for s in args.sizes.split(',')):
        with tempfile.TemporaryDirectory() as tmp:
            url = str(Path(tmp) / 'bench.db') if args.store == 'sqlite' else args.store
            await bench(url, size, args.seed, args.queries)


if __name__ == '__main__':
    asyncio.run(main())
