"""`recall conversations` a page at a time: it says when more exist, prints the cursor of the next page,
and `--after` pages on, in every format, on a real SQLite store."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import ModelRequest, UserPromptPart

from temporal_recall.store import open_store

from ._support import Ran, recall, recall_async

COUNT = 25
NEXT = re.compile(r'for the next page, add --after (\S+)$')


def ok(ran: Ran) -> Ran:
    assert ran.returncode == 0, str(ran)
    return ran


def refused(ran: Ran, *phrases: str) -> None:
    assert ran.returncode == 2 and ran.stdout == '', str(ran)
    assert ran.stderr.startswith('error: ') and ran.stderr.count('\n') == 1, str(ran)
    for phrase in phrases:
        assert phrase in ran.stderr, str(ran)


async def fill(path: Path, count: int) -> Path:
    """`count` conversations, `c00` (the oldest) on: every third without a scope, the others acme's."""
    async with await open_store(path) as store:
        for number in range(count):
            prompt = ModelRequest(parts=[UserPromptPart(f'hello {number}')])
            conversation = Conversation(messages=[prompt], conversation_id=f'c{number:02}')
            await store.save(conversation, scope=None if number % 3 == 0 else 'acme')
    return path


@pytest.fixture(scope='module')
async def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return await fill(tmp_path_factory.mktemp('pages') / 'recall.db', COUNT)


def listed(ran: Ran) -> list[str]:
    """The conversation ids of a table."""
    return re.findall(r'\bc\d\d\b', ran.stdout)


def test_a_page_says_how_many_it_shows_and_prints_the_next_cursor(many: Path) -> None:
    newest_first = [f'c{number:02}' for number in range(COUNT - 1, -1, -1)]
    first = ok(recall('conversations', '--limit', '10', '--store', many))
    *_, note = first.stdout.splitlines()
    assert listed(first) == newest_first[:10]
    assert note.startswith('10 of 25 shown; ')
    cursor = NEXT.search(note)
    assert cursor is not None, note

    second = ok(recall('conversations', '--limit', '10', '--after', cursor[1], '--store', many))
    assert listed(second) == newest_first[10:20]
    *_, note = second.stdout.splitlines()
    assert note.startswith('11-20 of 25 shown; ')
    cursor = NEXT.search(note)
    assert cursor is not None, note

    last = ok(recall('conversations', '--limit', '10', '--after', cursor[1], '--store', many))
    assert listed(last) == newest_first[20:]
    assert last.stdout.splitlines()[-1] == '21-25 of 25 shown.'

    whole = ok(recall('conversations', '--limit', '25', '--store', many))
    assert listed(whole) == newest_first and 'shown' not in whole.stdout, 'one page holding all says nothing more'


def test_json_yaml_and_ndjson_carry_the_cursor_where_scripts_read_it(many: Path) -> None:
    as_json = ok(recall('conversations', '--scope', 'acme', '--limit', '5', '--format', 'json', '--store', many))
    document = as_json.json()
    assert set(document) == {'conversations', 'total', 'next_cursor'}
    assert document['total'] == 16 and len(document['conversations']) == 5 and document['next_cursor']
    as_yaml = ok(recall('conversations', '--scope', 'acme', '--limit', '5', '--format', 'yaml', '--store', many))
    assert document['next_cursor'] in as_yaml.stdout

    pages: list[str] = []
    after: list[str] = []
    while True:
        ran = ok(
            recall('conversations', '--scope', 'acme', '--limit', '7', *after, '--format', 'ndjson', '--store', many)
        )
        pages += [item['conversation_id'] for item in ran.ndjson()]
        cursor = NEXT.search(ran.stderr.strip())
        if cursor is None:
            assert ran.stderr == '15-16 of 16 shown.\n', str(ran)
            break
        after = ['--after', cursor[1]]
    assert pages == [f'c{n:02}' for n in range(COUNT - 1, -1, -1) if n % 3], 'every conversation once, in order'

    last = ok(recall('conversations', '--scope', 'acme', '--limit', '5', '--format', 'json', '--store', many))
    for _ in range(3):
        last = ok(
            recall(
                'conversations', '--scope', 'acme', '--limit', '5', '--after', last.json()['next_cursor'],
                '--format', 'json', '--store', many,
            )
        )  # fmt: skip
    assert last.json() == {'conversations': last.json()['conversations'], 'total': 16, 'next_cursor': None}


async def test_a_page_after_the_last_conversation_says_so(tmp_path: Path) -> None:
    store = await fill(tmp_path / 'recall.db', 3)
    cursor = ok(await recall_async('conversations', '--limit', '2', '--format', 'json', '--store', store)).json()[
        'next_cursor'
    ]
    ok(await recall_async('delete', 'c00', '--store', store))
    ran = ok(await recall_async('conversations', '--limit', '2', '--after', cursor, '--store', store))
    assert ran.stdout == 'No conversations after this cursor.\n'


def test_more_than_a_hundred_a_page_is_refused_with_the_way_to_page(many: Path) -> None:
    refused(recall('conversations', '--limit', '101', '--store', many), '--limit', 'Must be <= 100', '--after')
    refused(recall('conversations', '--limit', '0', '--store', many), 'Must be >= 1')


def test_a_cursor_that_is_not_this_listings_is_bad_usage(many: Path) -> None:
    refused(recall('conversations', '--after', 'nonsense!', '--store', many), 'is not a cursor', 'leave the cursor out')
    acme = ok(recall('conversations', '--scope', 'acme', '--limit', '1', '--format', 'json', '--store', many))
    cursor = acme.json()['next_cursor']
    refused(recall('conversations', '--after', cursor, '--store', many), 'another scope')
    refused(recall('conversations', '--scope', 'globex', '--after', cursor, '--store', many), 'another scope')
    ok(recall('conversations', '--scope', 'acme', '--after', cursor, '--store', many))
