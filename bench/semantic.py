"""Recall quality by words, by meaning and both: recall@1 and recall@5 on the labelled set of `_semantic_set`.

    .venv/bin/python -m bench.semantic              # the table (markdown) on stdout
    .venv/bin/python -m bench.semantic --json       # the numbers as JSON
    .venv/bin/python -m bench.semantic --fusion rrf # hybrid fused by Reciprocal Rank Fusion instead
    .venv/bin/python -m bench.semantic --floors     # how far from the nearest a meaning-only hybrid hit lies

Each conversation is written to a fresh SQLite store through the product's own write path
(`embedded_append`: the step's documents embedded with the local model of the `semantic` extra,
then appended), each user message answered by the same acknowledgement. Each question is searched
in its own conversation with `search_messages`, once per mode, 5 hits; a question counts for
recall@k when its target message is among the first k hits. Deterministic: same set, same model,
same numbers (no timing is measured).

`--floors` measures `search._fusion.MEANING_FLOOR`: each document's cosine as a share of its question's
best cosine, for the paraphrased messages the words miss (the hits meaning must keep) and for the
exact-id questions' documents the words miss (noise for a question quoting an identifier), then hybrid
recall and the hits meaning alone puts on the exact-id questions' pages, at several floors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from bench._semantic_set import CONVERSATIONS, EXACT_IDS, PARAPHRASES, REPLY, Question
from temporal_recall.content import content_hash
from temporal_recall.embeddings import LOCAL_MODEL, as_embedder
from temporal_recall.embeddings._index import embedded_append
from temporal_recall.query import search_messages
from temporal_recall.search import SEARCH_MODES, _fusion, _meaning
from temporal_recall.search._fusion import fuse, reciprocal_rank_fusion
from temporal_recall.store import open_store
from temporal_recall.store.protocol import AppendRequest

__all__ = ('floor_table', 'measure', 'measure_floors', 'table')

DEPTH = 5

FUSIONS = {'score': fuse, 'rrf': reciprocal_rank_fusion}

FLOORS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
"""The meaning floors `--floors` measures hybrid search at."""


def _turn(text: str) -> list[ModelMessage]:
    return [ModelRequest(parts=[UserPromptPart(text)]), ModelResponse(parts=[TextPart(REPLY)])]


async def _fill(store: Any, embedder: Any) -> None:
    for conversation, said in CONVERSATIONS.items():
        history: list[ModelMessage] = []
        for index, text in enumerate(said):
            new = _turn(text)
            request = AppendRequest(
                conversation_id=conversation,
                scope=None,
                idempotency_key=f'{conversation}/{index}',
                base_length=len(history),
                base_hash=content_hash(history[-1]) if history else None,
                messages=new,
            )
            await embedded_append(store, embedder, request, lambda request=request: store.append(request))
            history += new


async def _ranks(store: Any, embedder: Any, questions: Sequence[Question], mode: str) -> list[int | None]:
    """Each question's target's rank among its hits (1 = first), `None` beyond `DEPTH`."""
    ranks: list[int | None] = []
    for question in questions:
        result = await search_messages(
            store, question.text, conversation_id=question.conversation, scope=None, mode=mode,  # type: ignore[arg-type]
            embedder=embedder, limit=DEPTH,
        )  # fmt: skip
        positions = [hit.position for hit in result.hits]
        target = 2 * question.target  # every user message is followed by the reply
        ranks.append(positions.index(target) + 1 if target in positions else None)
    return ranks


async def _cosines(store: Any, embedder: Any, question: Question) -> tuple[dict[int, float], float, set[int]]:
    """Each position's cosine, the question's best cosine, and the positions BM25 finds."""
    search = {'conversation_id': question.conversation, 'scope': None, 'embedder': embedder, 'limit': 100}
    near = await search_messages(store, question.text, mode='semantic', **search)
    words = await search_messages(store, question.text, mode='bm25', **search)
    cosines = {hit.position: hit.score for hit in near.hits}
    return cosines, max(cosines.values()), {hit.position for hit in words.hits}


async def _meaning_only(store: Any, embedder: Any, questions: Sequence[Question]) -> int:
    """How many of the questions' hybrid hits (`DEPTH` each) only meaning found."""
    found = 0
    for question in questions:
        result = await search_messages(
            store, question.text, conversation_id=question.conversation, scope=None, mode='hybrid',
            embedder=embedder, limit=DEPTH,
        )  # fmt: skip
        found += sum(1 for hit in result.hits if hit.found_by == ['semantic'])
    return found


def _recall_at(ranks: Sequence[int | None], k: int) -> float:
    return sum(1 for rank in ranks if rank is not None and rank <= k) / len(ranks)


async def measure() -> dict[str, dict[str, dict[str, float]]]:
    """`{set: {mode: {'recall@1': r, 'recall@5': r}}}` for the paraphrase and exact-id questions."""
    embedder = as_embedder(LOCAL_MODEL)
    with tempfile.TemporaryDirectory() as folder:
        store = await open_store(Path(folder) / 'semantic.db')
        try:
            await _fill(store, embedder)
            found: dict[str, dict[str, dict[str, float]]] = {}
            for name, questions in (('paraphrase', PARAPHRASES), ('exact id', EXACT_IDS)):
                found[name] = {}
                for mode in SEARCH_MODES:
                    ranks = await _ranks(store, embedder, questions, mode)
                    found[name][mode] = {'recall@1': _recall_at(ranks, 1), 'recall@5': _recall_at(ranks, DEPTH)}
            return found
        finally:
            await store.close()


def table(found: dict[str, dict[str, dict[str, float]]]) -> str:
    counts = {'paraphrase': len(PARAPHRASES), 'exact id': len(EXACT_IDS)}
    lines = ['| questions | mode | recall@1 | recall@5 |', '|---|---|---|---|']
    for name, modes in found.items():
        for mode in ('bm25', 'semantic', 'hybrid'):
            scores = modes[mode]
            lines.append(f'| {name} ({counts[name]}) | {mode} | {scores["recall@1"]:.2f} | {scores["recall@5"]:.2f} |')
    return '\n'.join(lines)


async def measure_floors(floors: Sequence[float] = FLOORS) -> dict[str, Any]:
    """The cosine shares the floor separates, and hybrid search at each of `floors`.

    `{'paraphrase': [(share, cosine) of each paraphrased message the words miss], 'exact id noise': [(share,
    cosine) of the nearest document the words miss, per exact-id question], 'floors': [{'floor', 'paraphrase
    recall@1', 'paraphrase recall@5', 'exact id recall@1', 'exact id meaning-only hits'}]}`, a share being a
    cosine divided by its question's best.
    """
    embedder = as_embedder(LOCAL_MODEL)
    chosen = _fusion.MEANING_FLOOR
    with tempfile.TemporaryDirectory() as folder:
        store = await open_store(Path(folder) / 'semantic.db')
        try:
            await _fill(store, embedder)
            paraphrase: list[tuple[float, float]] = []
            for question in PARAPHRASES:
                cosines, best, words = await _cosines(store, embedder, question)
                if 2 * question.target not in words:
                    paraphrase.append((cosines[2 * question.target] / best, cosines[2 * question.target]))
            noise: list[tuple[float, float]] = []
            for question in EXACT_IDS:
                cosines, best, words = await _cosines(store, embedder, question)
                nearest = max(cosine for position, cosine in cosines.items() if position not in words)
                noise.append((nearest / best, nearest))
            rows: list[dict[str, float]] = []
            for floor in floors:
                _fusion.MEANING_FLOOR = floor
                paraphrased = await _ranks(store, embedder, PARAPHRASES, 'hybrid')
                exact = await _ranks(store, embedder, EXACT_IDS, 'hybrid')
                rows.append({
                    'floor': floor,
                    'paraphrase recall@1': _recall_at(paraphrased, 1),
                    'paraphrase recall@5': _recall_at(paraphrased, DEPTH),
                    'exact id recall@1': _recall_at(exact, 1),
                    'exact id meaning-only hits': await _meaning_only(store, embedder, EXACT_IDS),
                })  # fmt: skip
            return {'paraphrase': sorted(paraphrase), 'exact id noise': sorted(noise), 'floors': rows}
        finally:
            _fusion.MEANING_FLOOR = chosen
            await store.close()


def floor_table(found: dict[str, Any]) -> str:
    def spread(pairs: Sequence[Sequence[float]]) -> str:
        shares, cosines = [pair[0] for pair in pairs], [pair[1] for pair in pairs]
        return (
            f'{min(shares):.2f} to {max(shares):.2f} of the best cosine (cosines {min(cosines):.2f} to '
            f'{max(cosines):.2f})'
        )

    paraphrase, noise = found['paraphrase'], found['exact id noise']
    lines = [
        f'The {len(paraphrase)} paraphrased messages only meaning finds: {spread(paraphrase)}.',
        f'The nearest document the words miss, per exact-id question ({len(noise)}): {spread(noise)}.',
        '',
        '| floor | paraphrase recall@1 | paraphrase recall@5 | exact-id recall@1 | meaning-only hits, exact id |',
        '|---|---|---|---|---|',
    ]
    for row in found['floors']:
        lines.append(
            f'| {row["floor"]:.1f} | {row["paraphrase recall@1"]:.2f} | {row["paraphrase recall@5"]:.2f} '
            f'| {row["exact id recall@1"]:.2f} | {row["exact id meaning-only hits"]} |'
        )
    return '\n'.join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--json', action='store_true', help='print the numbers as JSON')
    parser.add_argument('--fusion', choices=sorted(FUSIONS), default='score', help='how hybrid fuses (default: score)')
    parser.add_argument('--floors', action='store_true', help="measure hybrid search's meaning floor")
    arguments = parser.parse_args(argv)
    _meaning.FUSION = FUSIONS[arguments.fusion]
    if arguments.floors:
        floors = asyncio.run(measure_floors())
        sys.stdout.write((json.dumps(floors, indent=2) if arguments.json else floor_table(floors)) + '\n')
        return 0
    found = asyncio.run(measure())
    sys.stdout.write((json.dumps(found, indent=2) if arguments.json else table(found)) + '\n')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
