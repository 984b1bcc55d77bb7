"""The corpus of issue 18, generated lazily: any number of messages in bounded memory (stdlib only).

- A message is 20 to 300 words drawn from a Zipf distribution (exponent 1.07, as `_workload`) over
  a vocabulary of 30,000 made-up words; about 2% of messages also carry one rare identifier.
- The store holds `messages / 100` conversations of 100 messages in one tenant. The last ten
  hundreds form one 1,000-message conversation (`long`), written as ten appends, for the
  one-conversation latency; a corpus of fewer than 2,000 messages makes it one hundred long.

Each hundred (a `Unit`) is generated from its own seed, so every engine can be fed the same texts
one hundred at a time and nothing holds more than one hundred messages: a million-message run needs
no more memory than a thousand-message one.

Why not `_workload.Generator`: its syllable words top out near 12,600 distinct ones (short words
repeat), and its identifiers (`order A-123`, `src/x/y.py`) split into several common terms under
every tokenizer, so a "rare id" query would not be rare. Here a word is two to five of the same
syllables (30,000 distinct ones are easy to find) and an identifier is one alphanumeric token
(`tkt48213077`) that FTS5's `unicode61`, tantivy's `default` and our analyzer all keep whole, so the
three engines agree on which messages hold it.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from bench._workload import SYLLABLES

VOCABULARY_SIZE = 30_000
ZIPF_EXPONENT = 1.07
MIN_WORDS, MAX_WORDS = 20, 300
RARE_SHARE = 0.02
"""The share of messages that carry one rare identifier."""
ID_PREFIXES = ('ord', 'tkt', 'inv', 'acct', 'case')
UNIT = 100
"""Messages per conversation, and per `append`."""
LONG_CONVERSATION = 'long'
COMMON_RANKS = 30
"""Common query words are drawn from the 30 most frequent: each is in roughly 40% to all of the messages
(rank 30 has probability 0.33% per word, so a 160-word message holds it with probability 41%)."""
QUERY_CLASSES = ('rare id', 'common words', 'rare id + common')


@dataclass(frozen=True)
class Unit:
    """One hundred messages appended at once: conversation `conversation`, positions from `first`."""

    number: int
    conversation: str
    first: int
    texts: list[str]


@dataclass
class Corpus:
    """Deterministic texts and queries for `messages` messages from `seed`."""

    seed: int
    messages: int
    vocabulary: list[str] = field(init=False)
    cumulative: list[float] = field(init=False)

    def __post_init__(self) -> None:
        if self.messages < UNIT or self.messages % UNIT:
            raise ValueError(f'--messages must be a positive multiple of {UNIT}, not {self.messages}.')
        rng = random.Random(self.seed)
        words: set[str] = set()
        while len(words) < VOCABULARY_SIZE:
            words.add(''.join(rng.choices(SYLLABLES, k=rng.randint(2, 5))))
        self.vocabulary = sorted(words)
        rng.shuffle(self.vocabulary)  # rank order: the first word is the most frequent
        total = 0.0
        self.cumulative = []
        for rank in range(VOCABULARY_SIZE):
            total += 1.0 / (rank + 1) ** ZIPF_EXPONENT
            self.cumulative.append(total)

    @property
    def units(self) -> int:
        return self.messages // UNIT

    @property
    def long_units(self) -> int:
        """Hundreds in the long conversation: ten, or one in a corpus under 2,000 messages."""
        return 10 if self.units >= 20 else 1

    def unit(self, number: int) -> Unit:
        """The `number`-th hundred, the same whichever order units are asked for."""
        rng = random.Random(f'{self.seed}/{number}')
        first_long = self.units - self.long_units
        if number >= first_long:
            conversation, first = LONG_CONVERSATION, (number - first_long) * UNIT
        else:
            conversation, first = f'c{number}', 0
        return Unit(number, conversation, first, [self._text(rng) for _ in range(UNIT)])

    def __iter__(self) -> Iterator[Unit]:
        return (self.unit(number) for number in range(self.units))

    def _text(self, rng: random.Random) -> str:
        words = rng.choices(self.vocabulary, cum_weights=self.cumulative, k=rng.randint(MIN_WORDS, MAX_WORDS))
        if rng.random() < RARE_SHARE:
            words.insert(rng.randrange(len(words) + 1), f'{rng.choice(ID_PREFIXES)}{rng.randrange(10**7, 10**8)}')
        return ' '.join(words)


def rare_ids(text: str) -> list[str]:
    """The rare identifiers in a generated text (the only tokens with a digit)."""
    return [word for word in text.split(' ') if not word.isalpha()]


@dataclass
class IdSample:
    """A uniform sample of the rare ids seen while filling (reservoir sampling: bounded memory)."""

    size: int = 2_000
    seed: int = 0
    seen: int = 0
    ids: list[str] = field(default_factory=list[str])
    long: list[str] = field(default_factory=list[str])
    """Every id of the long conversation (about 20)."""

    def add(self, unit: Unit) -> None:
        rng = random.Random(f'{self.seed}/ids/{unit.number}')
        for text in unit.texts:
            for identifier in rare_ids(text):
                if unit.conversation == LONG_CONVERSATION:
                    self.long.append(identifier)
                self.seen += 1
                if len(self.ids) < self.size:
                    self.ids.append(identifier)
                elif (slot := rng.randrange(self.seen)) < self.size:
                    self.ids[slot] = identifier


def queries(corpus: Corpus, ids: list[str], per_class: int, seed: int) -> list[tuple[str, list[str]]]:
    """`per_class` queries of each class as `(class, terms)`, the classes interleaved.

    `rare id`: one identifier from `ids`; `common words`: two to four distinct common words;
    `rare id + common`: an identifier among two to four common words ("the refund for order
    A-1042 we talked about").
    """
    if not ids:
        raise ValueError('The corpus holds no rare id to query: generate more messages (about 2% carry one).')
    rng = random.Random(f'{seed}/queries')
    common = corpus.vocabulary[:COMMON_RANKS]
    out: list[tuple[str, list[str]]] = []
    for _ in range(per_class):
        out.append(('rare id', [rng.choice(ids)]))
        out.append(('common words', rng.sample(common, rng.randint(2, 4))))
        mixed = rng.sample(common, rng.randint(2, 4))
        mixed.insert(rng.randrange(len(mixed) + 1), rng.choice(ids))
        out.append(('rare id + common', mixed))
    return out
