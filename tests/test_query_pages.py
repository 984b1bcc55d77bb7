"""Paging the conversation listing (`list_conversation_page`) on both backends: every conversation once,
in order, while others write; a cursor pages only the listing of its own scope, and an altered one is refused."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationRecord
from pydantic_ai.messages import ModelRequest, UserPromptPart

from temporal_recall import ANY_SCOPE, list_conversation_page, list_conversations
from temporal_recall.errors import InvalidSearchParameters
from temporal_recall.query import ScopeFilter


async def save(store: Any, conversation_id: str, scope: str | None = 'acme') -> None:
    """Create the conversation, or add a prompt to it: either way it becomes the most recently updated."""
    conversation = await store.load(conversation_id, scope=scope) or Conversation(conversation_id=conversation_id)
    conversation.messages.append(ModelRequest(parts=[UserPromptPart(f'hello {conversation_id}')]))
    await store.save(conversation, scope=scope)


async def every_page(store: Any, *, scope: ScopeFilter, limit: int) -> list[list[str]]:
    """The listing page by page, following each page's cursor to the end."""
    pages: list[list[str]] = []
    after: str | None = None
    while True:
        page = await list_conversation_page(store, scope=scope, limit=limit, after=after)
        pages.append([info.conversation_id for info in page.conversations])
        if page.next_cursor is None:
            return pages
        after = page.next_cursor


def altered(cursor: str, **changes: Any) -> str:
    """`cursor` with some of its fields replaced (`order`, `conversation_id`, `tag`, `version`)."""
    document = json.loads(base64.urlsafe_b64decode(cursor + '=' * (-len(cursor) % 4)))
    for name, value in changes.items():
        document[('version', 'order', 'conversation_id', 'tag').index(name)] = value
    return base64.urlsafe_b64encode(json.dumps(document).encode()).decode().rstrip('=')


async def test_pages_list_every_conversation_once_newest_first(any_store: Any) -> None:
    for number in range(7):
        await save(any_store, f'c{number}')
    await save(any_store, 'g0', 'globex')
    await save(any_store, 'n0', None)

    assert await every_page(any_store, scope='acme', limit=3) == [['c6', 'c5', 'c4'], ['c3', 'c2', 'c1'], ['c0']]
    assert await every_page(any_store, scope='acme', limit=7) == [[f'c{n}' for n in range(6, -1, -1)]]
    assert await every_page(any_store, scope='initech', limit=3) == [[]]
    everything = [info.conversation_id for info in await list_conversations(any_store, limit=None)]
    assert [c for page in await every_page(any_store, scope=ANY_SCOPE, limit=4) for c in page] == everything
    assert [c for page in await every_page(any_store, scope=None, limit=1) for c in page] == ['n0']

    first = await list_conversation_page(any_store, scope='acme', limit=3, count=True)
    assert (first.total, first.remaining) == (7, 4)
    second = await list_conversation_page(any_store, scope='acme', limit=3, after=first.next_cursor, count=True)
    assert (second.total, second.remaining) == (7, 1)
    assert (await list_conversation_page(any_store, scope=ANY_SCOPE, limit=100, count=True)).remaining == 0


async def test_a_cursor_stays_good_while_conversations_are_written(any_store: Any) -> None:
    """Written between two pages: updates (of a listed conversation, of the cursor's own, of one not yet
    listed), a delete and a new conversation. The next page holds exactly the untouched ones that come
    after the first page; the written ones are at the front of a listing from the start."""
    for number in range(8):
        await save(any_store, f'c{number}')
    first = await list_conversation_page(any_store, scope='acme', limit=3)
    assert [info.conversation_id for info in first.conversations] == ['c7', 'c6', 'c5']

    await save(any_store, 'c7')
    await save(any_store, 'c5')  # the conversation the cursor names
    await save(any_store, 'c3')  # not listed yet: moves in front of the cursor
    await any_store.delete('c2', scope='acme')
    await save(any_store, 'c8')

    rest: list[str] = []
    after = first.next_cursor
    while after is not None:
        page = await list_conversation_page(any_store, scope='acme', limit=2, after=after)
        rest += [info.conversation_id for info in page.conversations]
        after = page.next_cursor
    assert rest == ['c4', 'c1', 'c0']
    assert [c for page in await every_page(any_store, scope='acme', limit=3) for c in page] == [
        'c8',
        'c3',
        'c5',
        'c7',
        'c6',
        'c4',
        'c1',
        'c0',
    ]


async def test_conversations_updated_in_the_same_microsecond_page_in_creation_order(any_store: Any) -> None:
    moment = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    names = ['t-e', 't-a', 't-d', 't-b', 't-c']  # creation order, unlike the ids' order
    for name in names:
        record = ConversationRecord(conversation_id=name, head_id=None, scope='acme', updated_at=moment)
        await any_store.write_record(record, expected_revision=None)
    await save(any_store, 'newer')

    assert await every_page(any_store, scope='acme', limit=2) == [['newer', 't-e'], ['t-a', 't-d'], ['t-b', 't-c']]
    page = await list_conversation_page(any_store, scope='acme', limit=3)
    await any_store.delete('t-a', scope='acme')  # the cursor's conversation is gone: no tie is skipped
    after = await list_conversation_page(any_store, scope='acme', limit=5, after=page.next_cursor)
    assert [info.conversation_id for info in after.conversations] == ['t-e', 't-d', 't-b', 't-c']


async def test_a_cursor_pages_only_the_listing_of_its_own_scope(any_store: Any) -> None:
    for number in range(3):
        await save(any_store, f'c{number}')
        await save(any_store, f'g{number}', 'globex')
    acme = (await list_conversation_page(any_store, scope='acme', limit=1)).next_cursor
    assert acme is not None
    for other in ('globex', None, '', ANY_SCOPE):
        with pytest.raises(InvalidSearchParameters, match='another scope'):
            await list_conversation_page(any_store, scope=other, limit=5, after=acme)
    # Pointing a cursor at another tenant's conversation shows nothing of it: the page is that of its
    # update time within the cursor's own scope.
    foreign = altered(acme, conversation_id='g2')
    page = await list_conversation_page(any_store, scope='acme', limit=5, after=foreign)
    assert {info.scope for info in page.conversations} == {'acme'}


BROKEN: list[tuple[Callable[[str], str], str]] = [
    (lambda cursor: '', 'is not a cursor'),
    (lambda cursor: 'not a cursor', 'is not a cursor'),
    (lambda cursor: cursor[:-3], 'is not a cursor'),
    (lambda cursor: cursor + '%', 'is not a cursor'),
    (lambda cursor: base64.urlsafe_b64encode(b'{"order": 1}').decode(), 'is not a cursor'),
    (lambda cursor: base64.urlsafe_b64encode(b'\xff\xfe').decode(), 'is not a cursor'),
    (lambda cursor: altered(cursor, version=2), 'is not a cursor'),
    (lambda cursor: altered(cursor, order='soon'), 'is not a cursor'),
    (lambda cursor: altered(cursor, order=True), 'is not a cursor'),
    (lambda cursor: altered(cursor, order=2**63), 'is not a cursor'),
    (lambda cursor: altered(cursor, conversation_id='c\x00'), 'is not a cursor'),
    (lambda cursor: altered(cursor, conversation_id='c' * 513), 'is not a cursor'),
    (lambda cursor: altered(cursor, tag=None), 'is not a cursor'),
    (lambda cursor: altered(cursor, tag='AAAAAAAA'), 'another scope'),
    (lambda cursor: 'A' * 5000, 'longer than any cursor'),
]
"""Ways to break a good cursor, and what the refusal says."""


@pytest.mark.parametrize(('make', 'problem'), BROKEN)
async def test_an_altered_or_malformed_cursor_is_refused(
    any_store: Any, make: Callable[[str], str], problem: str
) -> None:
    for number in range(2):
        await save(any_store, f'c{number}')
    cursor = (await list_conversation_page(any_store, scope='acme', limit=1)).next_cursor
    assert cursor is not None
    with pytest.raises(InvalidSearchParameters, match=problem) as refused:
        await list_conversation_page(any_store, scope='acme', limit=1, after=make(cursor))
    assert 'pass the next cursor a previous page of this listing printed' in str(refused.value)
    assert len(str(refused.value)) < 400, 'the message quotes at most the start of the cursor'


async def test_a_page_holds_at_least_one_conversation(any_store: Any) -> None:
    with pytest.raises(InvalidSearchParameters, match='at least one'):
        await list_conversation_page(any_store, scope='acme', limit=0)
