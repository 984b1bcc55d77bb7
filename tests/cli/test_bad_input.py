"""Ids and queries that are not usable text make `recall` exit 2 with a one-line message, on both backends.

In-process, with the arguments as Python hands them to `main()`: invalid UTF-8 arrives as lone
surrogates (`os.fsdecode`). One real process checks that path end to end, and that a NUL, which
no process argument can hold, is refused through `main()`.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator

import pytest

from temporal_recall.cli import main

from ..store._support import PostgresSite
from ..store._support import postgres_url as configured_postgres_url
from ._support import RECALL, Ran, clean_env, fill_store, recall

INVALID_UTF8 = b'support-\xff42'
BAD_IDS: list[str | bytes] = ['a\x01b', 'esc\x1b[31m', 'del\x7f', 'x' * 600, 'y' * 10_000, INVALID_UTF8]


@pytest.fixture(scope='module', params=['sqlite', pytest.param('postgres', marks=pytest.mark.postgres)])
async def store_arg(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    """The `--store` of a filled store of each backend."""
    if request.param == 'sqlite':
        path = tmp_path_factory.mktemp('cli-bad-input') / 'recall.db'
        await fill_store(path)
        yield str(path)
        return
    site = PostgresSite(configured_postgres_url())
    try:
        await fill_store(site.url)  # type: ignore[arg-type]  # open_store takes a URL as well as a path
        yield site.url
    finally:
        await site.close()


def run(*args: str | bytes) -> Ran:
    """`recall` as a process; bytes arguments are passed as they are, undecodable bytes included."""
    argv = [arg if isinstance(arg, bytes) else os.fsencode(arg) for arg in args]
    done = subprocess.run(
        [*(os.fsencode(part) for part in RECALL), *argv],
        capture_output=True,
        env=clean_env(),
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    shown = tuple(os.fsdecode(arg)[:60] for arg in argv)
    return Ran(shown, done.returncode, done.stdout.decode(errors='replace'), done.stderr.decode(errors='replace'))


def assert_usage_error(ran: Ran, *phrases: str) -> None:
    assert ran.returncode == 2, str(ran)[:2000]
    assert ran.stdout == ''
    assert ran.stderr.startswith('error: ') and ran.stderr.count('\n') == 1, ran.stderr[:2000]
    assert len(ran.stderr) < 300, 'the message quotes the value, never all of a long one'
    assert 'Traceback' not in ran.stderr
    for phrase in phrases:
        assert phrase in ran.stderr, ran.stderr


def test_bad_ids_and_queries_exit_2_with_one_line(store_arg: str) -> None:
    store = ['--store', store_arg]
    cases: list[tuple[list[str | bytes], str]] = []
    for bad in BAD_IDS:
        cases += [
            (['show', bad, *store], 'The conversation id'),
            (['delete', bad, *store], 'The conversation id'),
            (['search', bad, 'order', *store], 'The conversation id'),
            (['search', 'support-42', 'order', '--run', bad, *store], 'The `run_id`'),
            (['search', 'support-42', 'order', '--scope', bad, *store], 'The `scope`'),
            (['conversations', '--scope', bad, *store], 'The scope'),
        ]
    cases += [
        (['search', 'support-42', 'order\x1b[2J', *store], 'The query'),
        (['search', 'support-42', b'order \xff', *store], 'The query'),
    ]
    for args, phrase in cases:
        assert_usage_error(recall(*(os.fsdecode(arg) for arg in args)), phrase)
    still_there = recall('show', 'support-42', *store)
    assert still_there.returncode == 0 and 'Where is my order A-1042?' in still_there.stdout


def test_a_process_given_undecodable_bytes_exits_2(store_arg: str) -> None:
    assert_usage_error(run('show', INVALID_UTF8, '--store', store_arg), 'The conversation id', 'surrogate')


@pytest.mark.parametrize(
    'args',
    [
        ['show', 'a\x00b'],
        ['delete', '\x00'],
        ['search', 'support-42', 'order', '--run', '\x00'],
        ['search', 'support-42', 'order\x00'],
    ],
    ids=['show', 'delete', 'search-run', 'search-query'],
)
def test_a_nul_byte_exits_2(store_arg: str, args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*args, '--store', store_arg])
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ''
    assert captured.err.startswith('error: ') and captured.err.count('\n') == 1
    assert 'U+0000' in captured.err


def test_the_longest_id_is_only_absent(store_arg: str) -> None:
    ran = recall('show', 'z' * 512, '--store', store_arg)
    assert ran.returncode == 1 and 'no conversation' in ran.stderr and 'Traceback' not in ran.stderr, str(ran)
    assert '512 characters' in ran.stderr and 'z' * 41 not in ran.stderr
