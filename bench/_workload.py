"""One workload, generated from a seed, written as JSON both sides load (stdlib only).

Why stdlib only and JSON: the two sides run different pydantic-ai versions in different
virtualenvs, so neither may import the other's packages. Messages are plain dicts in the
`ModelMessagesTypeAdapter` JSON shape, restricted to fields pydantic-ai 2.62 and 2.68 both accept
(`kind`, `parts`, `part_kind`, content, tool call ids, timestamps), with timestamps derived from
the seed so every byte is the same on both sides.

Text is a Zipf-distributed made-up vocabulary plus rare identifiers (ticket ids, order numbers,
file paths), so BM25 sees both very common and very rare terms. A conversation is a sequence of
runs; a run is a user prompt followed by one to four tool calls and a final answer, split at step
boundaries of two messages each (the request a step sends and the response it gets), which is
where a step-persistence loop saves.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

VOCABULARY_SIZE = 20_000
SYLLABLES = ('ka', 'lo', 'mi', 'ren', 'tos', 'vu', 'ber', 'dan', 'el', 'fi', 'gor', 'hul', 'ix', 'jo', 'qua')
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Generator:
    """Deterministic text and message factory; one instance per seed."""

    seed: int
    rng: random.Random = field(init=False)
    vocabulary: list[str] = field(init=False)
    cumulative: list[float] = field(init=False)
    identifiers: list[str] = field(default_factory=list)
    clock: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        words = {''.join(self.rng.choices(SYLLABLES, k=self.rng.randint(1, 4))) for _ in range(VOCABULARY_SIZE * 2)}
        self.vocabulary = sorted(words)[:VOCABULARY_SIZE]
        self.rng.shuffle(self.vocabulary)
        total = 0.0
        self.cumulative = []
        for rank in range(len(self.vocabulary)):
            total += 1.0 / (rank + 1) ** 1.07
            self.cumulative.append(total)

    def words(self, count: int, *, top: int | None = None) -> list[str]:
        cumulative = self.cumulative if top is None else self.cumulative[:top]
        return self.rng.choices(self.vocabulary[: len(cumulative)], cum_weights=cumulative, k=count)

    def sentence(self, count: int) -> str:
        text = ' '.join(self.words(count))
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

    def timestamp(self) -> str:
        self.clock += 1
        return (EPOCH + timedelta(seconds=self.clock)).isoformat().replace('+00:00', 'Z')

    def request(self, part: dict[str, object]) -> dict[str, object]:
        return {'kind': 'request', 'parts': [part]}

    def response(self, part: dict[str, object]) -> dict[str, object]:
        return {'kind': 'response', 'parts': [part], 'model_name': 'bench-model', 'timestamp': self.timestamp()}

    def tool_call(self, call_id: str) -> dict[str, object]:
        args = {'q': self.sentence(3)}
        return self.response({'part_kind': 'tool-call', 'tool_name': 'lookup', 'args': args, 'tool_call_id': call_id})

    def run(self, run_id: str) -> list[list[dict[str, object]]]:
        """One agent run as its step boundaries: each step is the two messages it adds."""
        prompt = {'part_kind': 'user-prompt', 'content': self.sentence(self.rng.randint(8, 40))}
        prompt['timestamp'] = self.timestamp()
        calls = self.rng.randint(1, 4)
        steps = [[self.request(prompt), self.tool_call(f'{run_id}-call-0')]]
        for index in range(calls):
            call_id = f'{run_id}-call-{index}'
            returned = {
                'part_kind': 'tool-return',
                'tool_name': 'lookup',
                'content': self.sentence(self.rng.randint(20, 80)),
                'tool_call_id': call_id,
                'timestamp': self.timestamp(),
            }
            if index + 1 < calls:
                answer = self.tool_call(f'{run_id}-call-{index + 1}')
            else:
                answer = self.response({'part_kind': 'text', 'content': self.sentence(self.rng.randint(10, 60))})
            steps.append([self.request(returned), answer])
        return steps

    def conversation(self, conversation_id: str, messages: int) -> dict[str, object]:
        """A conversation of exactly `messages` messages (even), cut mid-run if need be."""
        runs: list[dict[str, object]] = []
        count = 0
        while count < messages:
            run_id = f'{conversation_id}-run-{len(runs)}'
            steps = self.run(run_id)
            kept = steps[: (messages - count) // 2]
            count += 2 * len(kept)
            runs.append({'run_id': run_id, 'steps': kept})
        return {'id': conversation_id, 'runs': runs}

    def queries(self, count: int) -> list[str]:
        """One- to three-term queries over common words, half ending in a rare identifier."""
        out = []
        for _ in range(count):
            terms = self.words(self.rng.randint(1, 3), top=2000)
            if self.identifiers and self.rng.random() < 0.5:
                terms[-1] = self.rng.choice(self.identifiers)
            out.append(' '.join(terms))
        return out


def dataset(seed: int, name: str, sizes: list[int], *, search: str, queries: int = 200) -> dict[str, object]:
    """Conversations of the given message counts plus the queries to time on them.

    `search` is `conversation` (each conversation searched on its own) or `all` (the whole store).
    The seed mixes in the name so datasets differ, yet stay identical for both sides.
    """
    generator = Generator(seed * 1_000_003 + sum(map(ord, name)))
    conversations = [generator.conversation(f'{name}-c{index}', size) for index, size in enumerate(sizes)]
    return {'name': name, 'search': search, 'conversations': conversations, 'queries': generator.queries(queries)}


def write_dataset(path: Path, data: dict[str, object]) -> Path:
    path.write_text(json.dumps(data, separators=(',', ':')))
    return path
