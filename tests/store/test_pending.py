"""`append` reads requests no response separates as one, as a run holds them (`store/log/_pending.py`).

A failed model call leaves its request stored with no answer; the next run merges it into its own
request, and every later run holds the two as one message. These appends are what such runs write.
"""

from __future__ import annotations

import pytest
from pydantic_ai import messages as m

from temporal_recall.errors import HistoryMismatch

from ._support import AT, AnyStore, reply, user
from .test_append import delta, history

OSLO, MADRID, ROME = 'Weather in Oslo?', 'And in Madrid?', 'And in Rome?'


def said(*texts: str, system: str | None = None) -> m.ModelRequest:
    """One request saying `texts` (after a system prompt), as pydantic-ai merges consecutive ones."""
    parts: list[m.ModelRequestPart] = [m.SystemPromptPart(system, timestamp=AT)] if system else []
    parts.extend(m.UserPromptPart(text, timestamp=AT) for text in texts)
    return m.ModelRequest(parts=parts, timestamp=AT)


async def _prompts(store: AnyStore) -> list[list[str]]:
    return [
        [str(part.content) for part in message.parts if isinstance(part, m.UserPromptPart)]
        for message in await history(store)
    ]


async def test_a_request_carrying_the_unanswered_one_stores_only_what_it_adds(recall_store: AnyStore) -> None:
    await recall_store.append(delta([reply('Hello.'), user(OSLO)]))
    # The next run's request merged the unanswered one: written at its position.
    result = await recall_store.append(delta([said(OSLO, MADRID)], base=[reply('Hello.')]))
    assert (result.length, result.stored) == (3, 1)
    assert await _prompts(recall_store) == [[], [OSLO], [MADRID]]
    # Its response follows the request as the run holds it: the two stored ones as one.
    answered = await recall_store.append(delta([reply('Sunny.')], base=[reply('Hello.'), said(OSLO, MADRID)]))
    assert (answered.length, answered.stored) == (4, 1)
    assert (await recall_store.read_record('c')).branches == []  # type: ignore[union-attr]


async def test_a_later_run_holding_them_as_one_attaches_after_them(recall_store: AnyStore) -> None:
    await recall_store.append(delta([user(OSLO), user(MADRID), reply('Sunny.')]))
    held = [said(OSLO, MADRID), reply('Sunny.')]
    # A delta after the response, counted as the run holds the history, and a full resend.
    after = await recall_store.append(delta([user(ROME)], base=held))
    assert (after.length, after.stored) == (4, 1)
    again = await recall_store.append(delta([*held, user(ROME), reply('Warm.')]))
    assert (again.length, again.stored) == (5, 1)
    assert await _prompts(recall_store) == [[OSLO], [MADRID], [], [ROME], []]
    assert (await recall_store.read_record('c')).branches == []  # type: ignore[union-attr]


async def test_requests_a_run_holds_apart_match_the_one_stored(recall_store: AnyStore) -> None:
    # A run retrying a first turn holds the system prompt and the prompt in two requests; the model
    # was sent them as one, which its model request stored.
    await recall_store.append(delta([said(OSLO, system='Be brief.'), reply('Sunny.')]))
    result = await recall_store.append(delta([said(system='Be brief.'), user(OSLO), reply('Sunny.')]))
    assert (result.length, result.stored) == (2, 0)
    assert (await recall_store.read_record('c')).branches == []  # type: ignore[union-attr]


async def test_an_answered_request_is_not_continued(recall_store: AnyStore) -> None:
    await recall_store.append(delta([user(OSLO), reply('Sunny.')]))
    old_head = (await recall_store.read_record('c')).head_id  # type: ignore[union-attr]
    # What follows an answer is a rewrite of the turn: it branches, as before.
    result = await recall_store.append(delta([said(OSLO, MADRID)]))
    assert (result.length, result.stored) == (1, 1)
    assert (await recall_store.read_record('c')).branches == [old_head]  # type: ignore[union-attr]


async def test_a_base_counted_as_one_must_still_be_at_the_end(recall_store: AnyStore) -> None:
    await recall_store.append(delta([user(OSLO), user(MADRID), reply('Sunny.'), user(ROME), reply('Warm.')]))
    # The response before the last turn is no attach point, however the writer counted.
    with pytest.raises(HistoryMismatch):
        await recall_store.append(delta([user('Thanks!')], base=[said(OSLO, MADRID), reply('Sunny.')]))
