"""Every `recall` subcommand against a real SQLite store, run in-process as a user at a pipe would see it.

What only a separate process shows (exit status through the interpreter, signals, stdout and
stderr kept apart) is in `test_process.py`.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import signal
import sqlite3
import subprocess
import time
import uuid
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from temporalio.client import Client

from temporal_recall.cli import app, to_yaml
from temporal_recall.demo._run import DEMO_TURNS
from temporal_recall.models import RunPromptInput, SearchRequest
from temporal_recall.search.plan import search_index
from temporal_recall.store import open_store
from temporal_recall.testing import DevServer, replay, running_worker
from temporal_recall.workflows import RunPromptWorkflow

from ..store._support import BRIEFED_HITS, run_briefed_agent
from ._support import RECALL, Filled, Ran, clean_env, recall, recall_async, recall_many, recall_process
from .workflows import GreetWorkflow

HARNESS_DB = Path(__file__).parents[1] / 'data' / 'harness_steps.db'
FORMATS = ('table', 'json', 'yaml', 'ndjson')


def subcommands() -> list[str]:
    return sorted(name for name in app if not name.startswith('-'))


def ok(ran: Ran) -> Ran:
    assert ran.returncode == 0, str(ran)
    return ran


def refused(ran: Ran, status: int, *phrases: str) -> Ran:
    assert ran.returncode == status, str(ran)
    assert ran.stdout == '', str(ran)
    assert ran.stderr.count('\n') <= 6, 'an error is a message, not a traceback:\n' + ran.stderr
    assert 'Traceback' not in ran.stderr
    for phrase in phrases:
        assert phrase in ran.stderr, str(ran)
    return ran


def table_rows(text: str) -> list[list[str]]:
    """The cells of a table's rows (below its header's rule), split on whitespace."""
    lines = text.splitlines()
    rule = next(i for i, line in enumerate(lines) if set(line.strip()) == {'─'})
    return [line.split() for line in lines[rule + 1 :] if line.strip()]


def parse(ran: Ran, fmt: str) -> Any:
    if fmt == 'json':
        return ran.json()
    if fmt == 'yaml':
        return yaml.safe_load(ran.stdout)
    if fmt == 'ndjson':
        return ran.ndjson()
    raise AssertionError(fmt)


# --- help ---------------------------------------------------------------------------------------------


def test_every_subcommand_is_covered_here() -> None:
    assert subcommands() == sorted(
        [
            'bodies',
            'check',
            'conversations',
            'codec-server',
            'delete',
            'demo',
            'dev-server',
            'export-history',
            'import-harness',
            'reindex',
            'search',
            'serve',
            'show',
            'stats',
            'worker',
        ]
    )


def test_every_subcommand_has_help_with_an_example() -> None:
    commands = [[name, '--help'] for name in subcommands()] + [['--help']]
    commands += [['bodies', name, '--help'] for name in sorted(app['bodies']) if not name.startswith('-')]
    for ran in recall_many(commands):
        ok(ran)
        assert 'Example: ' in ran.stdout, str(ran)
        assert ran.stdout.startswith('Usage: recall'), str(ran)


def test_no_command_is_bad_usage() -> None:
    refused(recall(), 2, 'a command is required: COMMAND', 'recall --help')


def test_an_unknown_command_or_option_is_bad_usage(filled: Filled) -> None:
    refused(recall('serach', 'x'), 2, 'serach')
    refused(recall('stats', '--stroe', filled.path), 2, '--stroe')
    refused(recall('search', 'support-42', 'order', '--format', 'xml', '--store', filled.path), 2, 'xml')


# --- search -----------------------------------------------------------------------------------------


async def test_search_formats_all_carry_the_library_hits(filled: Filled) -> None:
    runs = [
        await recall_async('search', 'support-42', 'Harbour', 'Street', '--store', filled.path, '--format', fmt)
        for fmt in FORMATS
    ]
    table, *structured = (ok(ran) for ran in runs)
    from temporal_recall.store import open_store

    store = await open_store(filled.path)
    try:
        result = await search_index(
            store, SearchRequest(query='Harbour Street', conversation_id='support-42', scope='acme', limit=20)
        )
    finally:
        await store.close()
    hits = [hit.model_dump(mode='json') for hit in result.hits]
    assert hits, 'the fixture should match'
    for ran, fmt in zip(structured, FORMATS[1:], strict=True):
        document = parse(ran, fmt)
        assert document == (hits if fmt == 'ndjson' else {'hits': hits}), fmt
    assert 'Order A-1042 will be delivered to 12 Harbour Street' in table.stdout
    assert table.stdout.splitlines()[0].split()[:3] == ['score', 'pos', 'role']


def test_search_without_matches(filled: Filled) -> None:
    table, as_json, as_ndjson = recall_many(
        [
            ['search', 'support-42', 'zeppelin', '--store', filled.path, '--format', fmt]
            for fmt in ('table', 'json', 'ndjson')
        ]
    )
    assert 'No matches for' in ok(table).stdout and '--scope' not in table.stdout
    assert ok(as_json).json() == {'hits': []}
    assert ok(as_ndjson).stdout == ''
    [unscoped] = recall_many([['search', 'all', 'zeppelin', '--store', filled.path]])
    assert 'stored without a scope; pass --scope for a tenant' in ok(unscoped).stdout


def test_search_options_limit_run_context_and_all(filled: Filled) -> None:
    limited, by_run, context, everything, unscoped = recall_many(
        [
            ['search', 'support-42', 'order', 'A-1042', 'deliveries', '--limit', '1', '--format', 'json'],
            ['search', 'support-42', 'order', 'deliveries', '--run', filled.run_ids['support-42'], '--format', 'json'],
            ['search', 'support-42', 'tool', 'lookup_order', '--context', '1', '--format', 'json'],
            ['search', 'all', 'invoice', '--scope', 'acme', '--format', 'json'],
            ['search', 'all', 'order', '--format', 'json'],
        ],
        cwd=filled.path.parent,
        env=clean_env(TEMPORAL_RECALL_STORE=str(filled.path)),  # the store from the environment
    )
    assert len(ok(limited).json()['hits']) == 1
    assert {hit['run_id'] for hit in ok(by_run).json()['hits']} == {filled.run_ids['support-42']}
    assert any(hit['context'] for hit in ok(context).json()['hits'])
    assert {hit['conversation_id'] for hit in ok(everything).json()['hits']} == {'acme-branchy'}
    # `all` without --scope searches the conversations stored without a scope.
    assert {hit['conversation_id'] for hit in ok(unscoped).json()['hits']} == {'unscoped-1'}


def test_search_finds_a_conversation_in_its_own_scope_without_scope_option(filled: Filled) -> None:
    ran = ok(recall('search', 'globex-7', 'refund', '--store', filled.path, '--format', 'json'))
    assert {hit['conversation_id'] for hit in ran.json()['hits']} == {'globex-7'}


def test_search_errors(filled: Filled) -> None:
    store = ['--store', str(filled.path)]
    unknown, wrong_scope, all_unknown_scope = recall_many(
        [
            ['search', 'nope', 'order', *store],
            ['search', 'support-42', 'order', '--scope', 'globex', *store],
            ['search', 'all', 'order', '--scope', 'initech', *store, '--format', 'json'],
        ]
    )
    refused(unknown, 1, "no conversation 'nope' in the store", 'recall conversations')
    refused(wrong_scope, 1, "no conversation 'support-42' in scope 'globex'", '--scope globex')
    assert ok(all_unknown_scope).json() == {'hits': []}


def test_search_role_keeps_one_speakers_hits(filled: Filled) -> None:
    store = ['--store', str(filled.path), '--format', 'json']
    everything, *by_role, unknown = recall_many(
        [
            ['search', 'support-42', 'order', 'A-1042', *store],
            *(
                ['search', 'support-42', 'order', 'A-1042', '--role', role, *store]
                for role in ('user', 'assistant', 'tool')
            ),
            ['search', 'support-42', 'order', '--role', 'robot', '--store', str(filled.path)],
        ]
    )
    hits = ok(everything).json()['hits']
    for role, ran in zip(('user', 'assistant', 'tool'), by_role, strict=True):
        found = ok(ran).json()['hits']
        assert found and {hit['role'] for hit in found} == {role}
        assert [hit['position'] for hit in found] == [hit['position'] for hit in hits if hit['role'] == role]
    refused(unknown, 2, 'Invalid value "robot" for --role', '"user", "assistant", "tool", "system"')


@pytest.mark.parametrize(
    ('value', 'message'),
    [
        ('0', 'Invalid value "0" for --limit. Must be >= 1.'),
        ('101', 'Invalid value "101" for --limit. Must be <= 100.'),
        ('abc', 'Invalid value for --limit: unable to convert "abc" into int.'),
    ],
)
def test_search_limit_out_of_range_is_bad_usage(filled: Filled, value: str, message: str) -> None:
    refused(recall('search', 'support-42', 'order', '--limit', value, '--store', filled.path), 2, message)


def test_conversations_limit_is_checked_too(filled: Filled) -> None:
    refused(recall('conversations', '--limit', '0', '--store', filled.path), 2, 'for --limit. Must be >= 1')


@pytest.mark.parametrize('query', ['', '   ', '?!'])
def test_an_empty_query_is_bad_usage(filled: Filled, query: str) -> None:
    ran = recall('search', 'support-42', query, '--store', filled.path)
    refused(ran, 2, 'error: The query')


def test_an_empty_query_is_refused_before_looking_for_the_conversation(filled: Filled) -> None:
    refused(recall('search', 'no-such-one', '', '--store', filled.path), 2, 'query is empty')


# --- bad stores -------------------------------------------------------------------------------------


def test_bad_stores_are_reported_not_created(tmp_path: Path) -> None:
    not_sqlite = tmp_path / 'notes.db'
    not_sqlite.write_text('shopping list\n' * 100)
    foreign = tmp_path / 'foreign.db'
    with closing(sqlite3.connect(foreign)) as connection:
        connection.execute('CREATE TABLE t (x)')
        connection.commit()
    missing, folder, text, other_sqlite, unsupported, missing_by_url = recall_many(
        [
            ['stats', '--store', tmp_path / 'missing.db'],
            ['stats', '--store', tmp_path],
            ['search', 'support-42', 'order', '--store', not_sqlite],
            ['conversations', '--store', foreign],
            ['stats', '--store', 'mysql://localhost/recall'],
            ['show', 'x', '--store', f'sqlite:///{tmp_path / "missing-too.db"}'],
        ],
        cwd=tmp_path,
    )
    refused(missing, 1, f'no store at {tmp_path / "missing.db"}', '--store', 'TEMPORAL_RECALL_STORE')
    refused(folder, 1, 'is a directory')
    refused(text, 1, 'is not a SQLite database')
    refused(other_sqlite, 1, 'not a temporal-recall store')
    refused(unsupported, 2, "scheme 'mysql' is not supported")
    refused(missing_by_url, 1, 'no store at')
    assert not (tmp_path / 'missing.db').exists()
    assert not (tmp_path / 'missing-too.db').exists()


def test_the_default_store_is_the_environments(filled: Filled, tmp_path: Path) -> None:
    ran = ok(recall('stats', '--format', 'json', env=clean_env(TEMPORAL_RECALL_STORE=f'sqlite:///{filled.path}')))
    assert ran.json()['stats']['conversations'] == 4
    # And without the variable: temporal-recall.db in the working directory, which is not there.
    refused(recall('stats', cwd=tmp_path), 1, 'no store at temporal-recall.db')


@pytest.mark.parametrize('width', [60, 100])
def test_tables_fit_the_terminal_width(filled: Filled, width: int) -> None:
    env = clean_env(TEMPORAL_RECALL_STORE=str(filled.path), COLUMNS=str(width))
    for command in (['search', 'support-42', 'order', '--context', '1'], ['conversations'], ['stats']):
        ran = ok(recall(*command, env=env))
        assert max(len(line) for line in ran.stdout.splitlines()) <= width, str(ran)
        assert len(ran.stdout.splitlines()) >= 3, str(ran)
    wrapped = ok(recall('search', 'support-42', 'Harbour', env=env)).stdout
    assert 'Harbour' in wrapped, 'a long excerpt wraps inside its column'


# --- conversations, show, delete --------------------------------------------------------------------


def test_conversations_in_every_format(filled: Filled) -> None:
    runs = recall_many([['conversations', '--store', filled.path, '--format', fmt] for fmt in FORMATS])
    table, as_json, as_yaml, as_ndjson = (ok(ran) for ran in runs)
    listed = as_json.json()['conversations']
    assert [c['conversation_id'] for c in listed] == ['acme-branchy', 'support-42', 'globex-7', 'unscoped-1']
    assert listed[0] == {
        'conversation_id': 'acme-branchy',
        'scope': 'acme',
        'updated_at': listed[0]['updated_at'],
        'head_id': listed[0]['head_id'],
        'branches': 1,
        'forked_from': None,
        'title': 'Invoice resend',
        'metadata': {'channel': 'email'},
    }
    assert [c['title'] for c in listed] == ['Invoice resend', 'Order A-1042 delivery', None, None]
    assert parse(as_yaml, 'yaml') == as_json.json()
    assert as_ndjson.ndjson() == listed
    assert [row[3] for row in table_rows(table.stdout)] == [c['conversation_id'] for c in listed]
    assert table.stdout.split()[:5] == ['updated', 'scope', 'branches', 'conversation', 'title']
    assert 'Order A-1042 delivery' in table.stdout


def test_conversations_scope_and_limit(filled: Filled) -> None:
    acme, one, none = recall_many(
        [
            ['conversations', '--scope', 'acme', '--format', 'json'],
            ['conversations', '--limit', '1', '--format', 'ndjson'],
            ['conversations', '--scope', 'initech'],
        ],
        env=clean_env(TEMPORAL_RECALL_STORE=str(filled.path)),
    )
    assert [c['conversation_id'] for c in ok(acme).json()['conversations']] == ['acme-branchy', 'support-42']
    assert [c['conversation_id'] for c in ok(one).ndjson()] == ['acme-branchy']
    assert "No conversations in scope 'initech'." in ok(none).stdout


def test_show_in_every_format(filled: Filled) -> None:
    runs = recall_many([['show', 'support-42', '--store', filled.path, '--format', fmt] for fmt in FORMATS])
    table, as_json, as_yaml, as_ndjson = (ok(ran) for ran in runs)
    document = as_json.json()
    assert document['conversation_id'] == 'support-42' and document['scope'] == 'acme'
    assert 'branches' not in document
    messages = document['messages']
    assert [m['role'] for m in messages] == ['user', 'assistant', 'tool', 'assistant', 'user', 'assistant']
    assert messages[0] == {
        'position': 0,
        'entry_id': messages[0]['entry_id'],
        'role': 'user',
        'text': 'Where is my order A-1042?',
    }
    assert parse(as_yaml, 'yaml') == document
    assert as_ndjson.ndjson() == messages
    assert '[0] user: Where is my order A-1042?' in table.stdout
    assert '[5] assistant: Noted: Thanks! I prefer deliveries after 5pm.' in table.stdout


def test_show_branches(filled: Filled) -> None:
    table, as_json = recall_many(
        [['show', 'acme-branchy', '--branches', '--store', filled.path, '--format', fmt] for fmt in ('table', 'json')]
    )
    document = ok(as_json).json()
    assert document['messages'][0]['text'] == 'Actually, resend invoice INV-8800 instead'
    [branch] = document['branches']
    assert branch['messages'][0]['text'] == 'Please resend invoice INV-7731'
    assert branch['tip'] == branch['messages'][-1]['entry_id']
    assert '--- branch 1: 2 messages' in ok(table).stdout
    assert 'Please resend invoice INV-7731' in table.stdout


def test_show_errors(filled: Filled) -> None:
    unknown, wrong_scope, right_scope = recall_many(
        [
            ['show', 'nope'],
            ['show', 'globex-7', '--scope', 'acme'],
            ['show', 'globex-7', '--scope', 'globex'],
        ],
        env=clean_env(TEMPORAL_RECALL_STORE=str(filled.path)),
    )
    refused(unknown, 1, "no conversation 'nope' in the store")
    refused(wrong_scope, 1, "no conversation 'globex-7' in scope 'acme'")
    assert 'Globex wants a refund' in ok(right_scope).stdout


def test_delete(filled: Filled) -> None:
    env = clean_env(TEMPORAL_RECALL_STORE=str(filled.path))
    unknown, wrong_scope = recall_many([['delete', 'nope'], ['delete', 'globex-7', '--scope', 'acme']], env=env)
    refused(unknown, 1, "no conversation 'nope' in the store")
    refused(wrong_scope, 1, "no conversation 'globex-7' in scope 'acme'")
    scoped, unscoped = recall_many([['delete', 'globex-7', '--scope', 'globex'], ['delete', 'unscoped-1']], env=env)
    assert ok(scoped).stdout == 'deleted globex-7\n'
    assert ok(unscoped).stdout == 'deleted unscoped-1\n'
    listed, show, search = recall_many(
        [['conversations', '--format', 'json'], ['show', 'globex-7'], ['search', 'globex-7', 'refund']], env=env
    )
    assert [c['conversation_id'] for c in ok(listed).json()['conversations']] == ['acme-branchy', 'support-42']
    refused(show, 1, "no conversation 'globex-7'")
    refused(search, 1, "no conversation 'globex-7'")


# --- reindex, stats ---------------------------------------------------------------------------------


def test_reindex_rebuilds_and_search_still_answers(filled: Filled) -> None:
    before = ok(recall('search', 'support-42', 'Harbour', '--store', filled.path, '--format', 'json')).json()
    ran = ok(recall('reindex', '--store', filled.path))
    assert re.fullmatch(r'reindexed \d+ documents\n', ran.stdout), ran.stdout
    assert re.search(r'^reindexing (\d+)/\1 entries \(done in [\d.]+s, [\d,]+ entries/s\)$', ran.stderr, re.M), (
        ran.stderr
    )
    assert '\x1b' not in ran.stderr, 'piped: plain lines, no terminal codes'
    after = ok(recall('search', 'support-42', 'Harbour', '--store', filled.path, '--format', 'json')).json()
    assert [h['entry_id'] for h in after['hits']] == [h['entry_id'] for h in before['hits']]


@pytest.mark.parametrize(
    ('command', 'done'),
    [
        (['reindex'], r'(\d+)/\1'),
        (['check'], r'4/4'),
        (['import-harness', HARNESS_DB], r'11/11'),
    ],
    ids=['reindex', 'check', 'import-harness'],
)
def test_long_jobs_draw_a_bar_with_rate_and_time_left_on_a_terminal(
    filled: Filled, command: list[str | Path], done: str
) -> None:
    env = clean_env(TTY_COMPATIBLE='1', TTY_INTERACTIVE='1', COLUMNS='120')
    ran = ok(recall(*command, '--store', filled.path, env=env))
    screen = re.sub(r'\x1b\[[0-9;?]*[A-Za-z]', '', ran.stderr)  # the bar as drawn, without colours and cursor moves
    assert '\x1b[' in ran.stderr, 'a terminal gets a live bar'
    last = [line for line in screen.splitlines() if line.strip()][-1]
    assert re.search(rf'━+ {done} ', last), screen
    assert re.search(r'[\d,]+ \w+/s', screen), 'the rate is shown: ' + screen
    assert re.search(r'\d+:\d\d:\d\d', last), 'the time left is shown: ' + screen
    assert '\x1b' not in ran.stdout, 'the result itself stays plain'


def test_check_is_clean_on_a_healthy_store_and_fails_on_a_damaged_one(filled: Filled) -> None:
    clean = ok(recall('check', '--store', filled.path))
    assert re.fullmatch(r'clean: checked \d+ conversations, \d+ entries, .*\n', clean.stdout), clean.stdout
    assert re.search(r'^checking the index 2/4 steps', clean.stderr, re.M), clean.stderr
    assert re.search(r'^checked 4/4 steps \(done in', clean.stderr, re.M), clean.stderr
    with closing(sqlite3.connect(filled.path)) as connection:
        connection.execute('DELETE FROM posting_blocks WHERE first_doc = (SELECT min(first_doc) FROM posting_blocks)')
        connection.execute('DELETE FROM pending_postings WHERE segment = (SELECT min(segment) FROM pending_postings)')
        connection.execute("UPDATE entries SET message = replace(message, 'A-1042', 'A-1043')")
        connection.commit()
    damaged = recall('check', '--store', filled.path)
    assert damaged.returncode == 1, str(damaged)
    assert re.search(r'^index: document \d+: lists terms without postings', damaged.stdout, re.M), damaged.stdout
    assert re.search(r'^content_hash: entry .*: holds a message whose hash', damaged.stdout, re.M), damaged.stdout
    assert re.search(r'^\d+ problems in ', damaged.stdout, re.M), damaged.stdout
    assert 'Traceback' not in damaged.stderr


def test_check_refuses_a_missing_store(tmp_path: Path) -> None:
    refused(recall('check', '--store', tmp_path / 'none.db'), 1, 'no store at')


async def test_stats_in_every_format(filled: Filled) -> None:
    from temporal_recall.store import open_store

    store = await open_store(filled.path)
    try:
        expected = await store.stats()
    finally:
        await store.close()
    runs = [await recall_async('stats', '--store', filled.path, '--format', fmt) for fmt in FORMATS]
    table, as_json, as_yaml, as_ndjson = (ok(ran) for ran in runs)
    stats = as_json.json()['stats']
    assert stats['conversations'] == expected.conversations == 4
    assert stats['entries'] == expected.entries
    assert stats['documents'] == expected.documents
    assert stats['store_url'] == f'sqlite:///{filled.path}' and stats['path'] == str(filled.path)
    assert parse(as_yaml, 'yaml') == {'stats': stats}
    assert as_ndjson.ndjson() == [stats]
    assert ['entries', str(expected.entries)] in [line.split() for line in table.stdout.splitlines()]


# --- import-harness ---------------------------------------------------------------------------------


def test_import_harness_twice(tmp_path: Path) -> None:
    store = tmp_path / 'imported.db'
    first = ok(recall('import-harness', HARNESS_DB, '--store', store, '--scope', 'acme'))
    assert re.search(r'^importing 11/11 runs \(done in', first.stderr, re.M), first.stderr
    assert 'read 11 runs' in first.stdout and '34 stored' in first.stdout
    stats = ok(recall('stats', '--store', store, '--format', 'json')).json()['stats']

    second = ok(recall('import-harness', HARNESS_DB, '--store', store, '--scope', 'acme'))

    assert '0 stored' in second.stdout and 'all duplicates' in second.stdout
    assert ok(recall('stats', '--store', store, '--format', 'json')).json()['stats'] == stats
    listed = ok(recall('conversations', '--store', store, '--scope', 'acme', '--format', 'json')).json()
    assert 'support-1' in {c['conversation_id'] for c in listed['conversations']}


def test_import_harness_errors(tmp_path: Path) -> None:
    store = tmp_path / 'imported.db'
    ok(recall('import-harness', HARNESS_DB, '--store', store))
    missing, not_harness, conflict = recall_many(
        [
            ['import-harness', tmp_path / 'nope.db', '--store', store],
            ['import-harness', store, '--store', tmp_path / 'other.db'],
            ['import-harness', HARNESS_DB, '--store', store, '--scope', 'acme'],
        ]
    )
    refused(missing, 1, 'does not exist')
    refused(not_harness, 1, 'not a pydantic-ai-harness step database')
    assert conflict.returncode == 1
    assert 'left alone, stored under another scope' in conflict.stdout
    assert 'pass the --scope they were stored with' in conflict.stderr


# --- serve ------------------------------------------------------------------------------------------


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return int(sock.getsockname()[1])


def _get(port: int, path: str, token: str | None) -> tuple[int, Any]:
    import http.client

    connection = http.client.HTTPConnection('127.0.0.1', port, timeout=10)
    try:
        connection.request('GET', path, headers={'Authorization': f'Bearer {token}'} if token else {})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_serve_answers_over_http_until_interrupted(filled: Filled, tmp_path: Path) -> None:
    tokens = tmp_path / 'tokens.json'
    token = 'cli-serve-token-0123456789'
    tokens.write_text(json.dumps({token: 'acme'}))
    port = _free_port()
    process = subprocess.Popen(
        [*RECALL, 'serve', '--store', str(filled.path), '--tokens', str(tokens), '--port', str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=clean_env(),
        text=True,
    )
    try:
        deadline = time.monotonic() + 300  # a hang guard only: startup time is not what is tested
        while True:
            try:
                status, body = _get(port, '/api/v1/conversations', token)
                break
            except OSError:
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, 'recall serve did not start'
                time.sleep(0.1)
        assert status == 200
        assert [c['conversation_id'] for c in body['conversations']] == ['acme-branchy', 'support-42']
        assert _get(port, '/api/v1/conversations', None)[0] == 401
        assert _get(port, '/api/v1/conversations/globex-7', token)[0] == 404
    finally:
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=30)
    assert process.returncode in (0, 130), err
    assert 'Traceback' not in err


def test_serve_configuration_errors(filled: Filled, tmp_path: Path) -> None:
    short = tmp_path / 'short.json'
    short.write_text('{"abc": "acme"}')
    broken = tmp_path / 'broken.json'
    broken.write_text('{"abc": ')
    good = tmp_path / 'good.json'
    good.write_text(json.dumps({'a-long-enough-token-123': 'acme'}))
    missing_tokens, short_token, broken_json, no_store, no_tokens_option = recall_many(
        [
            ['serve', '--tokens', tmp_path / 'none.json', '--store', filled.path],
            ['serve', '--tokens', short, '--store', filled.path],
            ['serve', '--tokens', broken, '--store', filled.path],
            ['serve', '--tokens', good, '--store', tmp_path / 'missing.db'],
            ['serve', '--store', filled.path],
        ]
    )
    refused(missing_tokens, 2, 'Cannot read the tokens file')
    refused(short_token, 2, 'shorter than 16 characters')
    refused(broken_json, 2, 'not valid JSON')
    refused(no_store, 1, 'no store at')
    refused(no_tokens_option, 2, '--tokens', 'requires an argument')


# --- Temporal: export-history, worker, dev-server, demo ---------------------------------------------


@pytest.mark.temporal
async def test_export_history_writes_a_replayable_history(
    temporal_client: Client, temporal_dev_server: DevServer, tmp_path: Path
) -> None:
    workflow_id = f'cli-export-{uuid.uuid4().hex[:8]}'
    async with running_worker(
        temporal_client, agents=[], store=str(tmp_path / 'worker.db'), workflows=[GreetWorkflow]
    ) as worker:
        result = await temporal_client.execute_workflow(
            GreetWorkflow.run, 'Dana', id=workflow_id, task_queue=worker.task_queue
        )
    assert result == 'Hello, Dana!'
    output = tmp_path / 'history.json'

    ran = ok(await recall_async('export-history', workflow_id, '--address', temporal_dev_server.address, '-o', output))
    to_stdout = ok(
        await recall_async('export-history', workflow_id, env=clean_env(TEMPORAL_ADDRESS=temporal_dev_server.address))
    )

    assert ran.stdout == f'wrote {output}\n'
    history = output.read_text()
    assert json.loads(history)['events'][0]['eventType'] in (
        'EVENT_TYPE_WORKFLOW_EXECUTION_STARTED',
        'WorkflowExecutionStarted',
    )
    assert json.loads(to_stdout.stdout) == json.loads(history)
    replayed = await replay([history], workflows=[GreetWorkflow])
    assert replayed.replay_failures == {}


@pytest.mark.temporal
async def test_export_history_of_an_unknown_workflow_fails_clearly(temporal_dev_server: DevServer) -> None:
    ran = await recall_async('export-history', 'no-such-workflow', '--address', temporal_dev_server.address)
    refused(ran, 1, "cannot export workflow 'no-such-workflow'")


async def test_export_history_without_a_server_fails_clearly() -> None:
    ran = await recall_async('export-history', 'wf', '--address', f'127.0.0.1:{_free_port()}')
    refused(ran, 1, 'cannot reach Temporal at 127.0.0.1:')


@pytest.mark.temporal
async def test_worker_serves_runs_until_terminated(
    temporal_client: Client, temporal_dev_server: DevServer, tmp_path: Path
) -> None:
    store = tmp_path / 'worker.db'
    queue = f'cli-worker-{uuid.uuid4().hex[:8]}'
    env = clean_env(TEMPORAL_ADDRESS=temporal_dev_server.address, TEMPORAL_RECALL_TASK_QUEUE=queue)
    process = await asyncio.create_subprocess_exec(
        *RECALL,
        'worker',
        '--demo',
        '--store',
        str(store),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        output = await asyncio.wait_for(
            temporal_client.execute_workflow(
                RunPromptWorkflow.run,
                RunPromptInput(prompt='Where is order A-1042?', conversation_id='cli-worker-1', scope='acme'),
                id=f'cli-worker-{uuid.uuid4().hex[:8]}',
                task_queue=queue,
            ),
            timeout=60,
        )
    finally:
        process.send_signal(signal.SIGTERM)
        _stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode == 0, stderr.decode()
    assert output.conversation_id == 'cli-worker-1'
    shown = ok(await recall_async('show', 'cli-worker-1', '--store', store, '--format', 'json')).json()
    assert shown['scope'] == 'acme'
    assert shown['messages'][0]['text'] == 'Where is order A-1042?'
    assert len(shown['messages']) == output.new_messages


async def _dev_server(port: int, *options: str) -> asyncio.subprocess.Process:
    """`recall dev-server --port PORT OPTIONS` as a process of its own, its output piped."""
    return await asyncio.create_subprocess_exec(
        *RECALL,
        'dev-server',
        '--port',
        str(port),
        *options,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


@pytest.mark.temporal
@pytest.mark.slow
async def test_dev_server_runs_until_interrupted(tmp_path: Path) -> None:
    port = _free_port()
    process = await _dev_server(port, '--db-filename', str(tmp_path / 'temporal.db'))
    assert process.stdout is not None
    try:
        first = await asyncio.wait_for(process.stdout.readline(), timeout=300)  # hang guards, not bounds
        second = await asyncio.wait_for(process.stdout.readline(), timeout=60)
        assert first.decode() == f'Temporal dev server at 127.0.0.1:{port}\n'
        assert second.decode() == 'Press Ctrl-C to stop.\n'
        client = await Client.connect(f'127.0.0.1:{port}')
        assert (await client.service_client.check_health()) is True
    finally:
        process.send_signal(signal.SIGINT)
        rest, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, stderr.decode()
    assert rest.decode() == 'stopped\n'
    with pytest.raises(RuntimeError, match='connect'):  # nothing serves on the port any more
        await Client.connect(f'127.0.0.1:{port}')


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid`, from /proc."""
    found = []
    for stat in Path('/proc').glob('[0-9]*/stat'):
        try:
            fields = stat.read_text().rsplit(')', 1)[1].split()
        except OSError:  # the process ended while we looked
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.temporal
@pytest.mark.slow
async def test_dev_server_exits_non_zero_when_its_server_dies(tmp_path: Path) -> None:
    port = _free_port()
    process = await _dev_server(port)
    assert process.stdout is not None
    try:
        assert (await asyncio.wait_for(process.stdout.readline(), timeout=300)).startswith(b'Temporal dev server at')
        servers = [
            child for child in _children(process.pid) if b'start-dev' in Path(f'/proc/{child}/cmdline').read_bytes()
        ]
        assert len(servers) == 1
        os.kill(servers[0], signal.SIGKILL)
        rest, stderr = await asyncio.wait_for(process.communicate(), timeout=300)  # a hang guard, not a bound
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 1, stderr.decode()
    assert f'the Temporal dev server at 127.0.0.1:{port} stopped answering' in stderr.decode()
    assert b'stopped\n' not in rest


@pytest.mark.temporal
@pytest.mark.slow
async def test_demo_prints_the_stored_transcript(tmp_path: Path) -> None:
    store = tmp_path / 'demo.db'
    # A process of its own: the demo registers its agent under the name `demo` for its worker, as the
    # tests of the pinned activity names do with another agent object of that name.
    ran = await asyncio.to_thread(recall_process, 'demo', '--store', f'sqlite:///{store}', timeout=300)
    ok(ran)
    for prompt in DEMO_TURNS:
        assert f'user:  {prompt}' in ran.stdout
    assert 'Stored: ' in ran.stdout
    assert 'Demo finished' in ran.stdout
    stored = ran.stdout[ran.stdout.index('Stored: ') : ran.stdout.index('Demo finished')]
    transcript = [line for line in stored.splitlines() if re.match(r'\s+\[\s*\d+\] ', line)]
    assert len(transcript) >= 2 * len(DEMO_TURNS)
    listed = ok(await recall_async('conversations', '--store', store, '--format', 'json')).json()
    [conversation] = listed['conversations']
    shown = ok(await recall_async('show', conversation['conversation_id'], '--store', store, '--format', 'json'))
    assert len(shown.json()['messages']) == len(transcript)


# --- the YAML writer ----------------------------------------------------------------------------------

_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False)
    | st.text(max_size=30)
)
_json_values = st.recursive(
    _json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)


@given(document=st.dictionaries(st.text(max_size=12), _json_values, max_size=5))
@settings(max_examples=150)
def test_yaml_output_reads_back_as_the_same_document(document: dict[str, Any]) -> None:
    loaded = yaml.safe_load(to_yaml(document))
    assert _normalized(loaded if loaded is not None else {}) == _normalized(document)


def _normalized(value: Any) -> Any:
    if isinstance(value, float) and math.isinf(value):
        return ('inf', value > 0)
    if isinstance(value, dict):
        return {str(k): _normalized(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    return value


async def test_search_role_finds_a_system_prompt_only_as_the_systems(tmp_path: Path) -> None:
    """An agent's system prompt rides the request of the first user prompt; `--role` tells them apart."""
    path = tmp_path / 'briefed.db'
    async with await open_store(str(path)) as store:
        await run_briefed_agent(store, scope='acme')
    for (query, role), hits in BRIEFED_HITS.items():
        ran = await recall_async('search', 'briefed', query, '--role', role, '--store', path, '--format', 'json')
        assert [(hit['position'], hit['role'], hit['excerpt']) for hit in ok(ran).json()['hits']] == hits, role
