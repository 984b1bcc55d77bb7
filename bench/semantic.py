"""Recall quality by words, by meaning and both: recall@1 and recall@5 on the labelled set of `_semantic_set`.

    .venv/bin/python -m bench.semantic              # the table (markdown) on stdout
    .venv/bin/python -m bench.semantic --json       # the numbers as JSON
    .venv/bin/python -m bench.semantic --fusion rrf # hybrid fused by Reciprocal Rank Fusion instead

Each conversation is written to a fresh SQLite store through the product's own write path
(`embedded_append`: the step's documents embedded with the local model of the `semantic` extra,
then appended), each user message answered by the same acknowledgement. Each question is searched
in its own conversation with `search_messages`, once per mode, 5 hits; a question counts for
recall@k when its target message is among the first k hits. Deterministic: same set, same model,
same numbers (no timing is measured).
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
from temporal_recall.search import SEARCH_MODES, _meaning
from temporal_recall.search._fusion import fuse, reciprocal_rank_fusion
from temporal_recall.store import open_store
from temporal_recall.store.protocol import AppendRequest

__all__ = ('measure', 'table')

DEPTH = 5

FUSIONS = {'score': fuse, 'rrf': reciprocal_rank_fusion}


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--json', action='store_true', help='print the numbers as JSON')
    parser.add_argument('--fusion', choices=sorted(FUSIONS), default='score', help='how hybrid fuses (default: score)')
    arguments = parser.parse_args(argv)
    _meaning.FUSION = FUSIONS[arguments.fusion]
    found = asyncio.run(measure())
    sys.stdout.write((json.dumps(found, indent=2) if arguments.json else table(found)) + '\n')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
