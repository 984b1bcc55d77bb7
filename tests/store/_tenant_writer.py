"""One of several processes writing one tenant of a store at once (`test_concurrent_writers.py`).

Appends steps to conversations of its own, with texts drawn from one small pool shared by every
writer (so the same new contents race to become documents), branches some (a step appended after an
earlier message, as a retried model call does), forks some, writes and deletes conversations of
texts only they hold, and answers what each of its conversations must hold afterwards:
`conversation id -> [(role, text), ...]`, or `None` once deleted.

A deleted conversation holds no pooled text: a document whose first holder is deleted while another
conversation still holds it keeps its number, which `reindex` gives its first surviving holder (the
one exception to `reindex` reproducing the index, `EngineStore.reindex`).
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from pydantic_ai import messages as m

from temporal_recall.content import content_hash
from temporal_recall.store import AppendRequest, open_store

from ._support import reply, user

POOL = [
    f'{subject} {verb} the {thing} before {time}'
    for subject in ('the courier', 'our team', 'the desk')
    for verb in ('shipped', 'checked', 'refunded')
    for thing in ('parcel', 'invoice order')
    for time in ('noon', 'friday')
]
"""36 texts: a step draws its messages from them, so every content is written by several writers."""

Expected = dict[str, list[tuple[str, str]] | None]


def _message(role: str, text: str) -> m.ModelMessage:
    return user(text) if role == 'user' else reply(text)


def _step(rng: random.Random, unique: str) -> list[tuple[str, str]]:
    """A user prompt and a reply from the pool, and now and then a text no other writer has."""
    texts = rng.sample(POOL, 2)
    if rng.random() < 0.3:
        texts[1] = f'{texts[1]} {unique}'
    return [('user', texts[0]), ('assistant', texts[1])]


async def write(url: str, writer: int, seed: int, steps: int, start: Any) -> Expected:
    rng = random.Random(seed * 1000 + writer)
    expected: Expected = {}
    async with await open_store(url) as store:
        start.wait()
        for number in range(steps):
            live = [key for key, held in expected.items() if held is not None]
            choice = rng.random()
            pooled = [key for key in live if '-d' not in key]
            if pooled and choice < 0.1:
                source = rng.choice(pooled)
                held = expected[source]
                assert held is not None
                at = rng.randint(1, len(held))
                fork = f'w{writer}-f{number}'
                await store.fork(source, at=at, new_conversation_id=fork)
                expected[fork] = held[:at]
                continue
            deletable = [key for key in live if '-d' in key]
            if deletable and choice < 0.16:
                gone = rng.choice(deletable)
                await store.delete(gone)
                expected[gone] = None
                continue
            if choice < 0.25:
                conversation = rng.choice(deletable) if deletable and choice < 0.2 else f'w{writer}-d{number}'
            else:
                pooled = [key for key in live if '-d' not in key]
                conversation = rng.choice(pooled) if pooled and choice < 0.85 else f'w{writer}-c{number}'
            history = expected.get(conversation) or []
            base = len(history)
            if history and choice > 0.7 and len(history) >= 2:
                base = len(history) - rng.choice((1, 2))  # A branch off an earlier message.
            unique = f'unique{writer}x{number}'
            if '-d' in conversation:
                new = [('user', f'only {unique} asks'), ('assistant', f'only {unique} answers')]
            else:
                new = _step(rng, unique)
            await store.append(
                AppendRequest(
                    conversation_id=conversation,
                    scope=None,
                    idempotency_key=f'w{writer}-{number}',
                    base_length=base,
                    base_hash=content_hash(_message(*history[base - 1])) if base else None,
                    messages=[_message(role, text) for role, text in new],
                )
            )
            expected[conversation] = [*history[:base], *new]
    return expected


def run(url: str, writer: int, seed: int, steps: int, start: Any, out: Any) -> None:
    out.put((writer, asyncio.run(write(url, writer, seed, steps, start))))
