"""`recall` as a real process: what only a process shows, exit statuses, stdout and stderr apart, a terminal.

Everything else runs in-process (`test_cli.py`); the signal handling of `serve`, `worker` and
`dev-server` is tested there with real processes too.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from ._support import RECALL, Filled, clean_env, recall_process


def test_exit_statuses_and_streams(filled: Filled) -> None:
    store = ['--store', str(filled.path)]
    with ThreadPoolExecutor(max_workers=4) as pool:  # each process spends most of its second importing
        listed, missing, usage, helped = pool.map(
            lambda args: recall_process(*args),
            [
                ['conversations', *store, '--format', 'json'],
                ['show', 'nope', *store],
                ['search', 'support-42', 'order', '--limit', '0', *store],
                ['--help'],
            ],
        )
    assert listed.returncode == 0 and listed.stderr == '', str(listed)
    assert len(listed.json()['conversations']) == 4
    assert missing.returncode == 1 and missing.stdout == '', str(missing)
    assert missing.stderr.startswith("error: no conversation 'nope'") and missing.stderr.count('\n') == 1
    assert usage.returncode == 2 and usage.stdout == '', str(usage)
    assert usage.stderr.count('\n') == 1 and 'for --limit. Must be >= 1' in usage.stderr
    assert helped.returncode == 0 and helped.stdout.startswith('Usage: recall') and helped.stderr == ''
    reindexed = recall_process('reindex', '--store', filled.path)
    assert reindexed.returncode == 0 and re.fullmatch(r'reindexed \d+ documents\n', reindexed.stdout), str(reindexed)
    assert re.search(r'^reindexing (\d+)/\1 entries \(done', reindexed.stderr, re.M), 'piped: progress as lines'


def test_recall_needs_no_postgres_driver_for_a_sqlite_store(filled: Filled) -> None:
    """`pip install temporal-recall` (without the `postgres` extra) gives a working `recall`."""
    without_asyncpg = "import sys; sys.modules['asyncpg'] = None; from temporal_recall.cli import main; main()"
    done = subprocess.run(
        [sys.executable, '-c', without_asyncpg, 'stats', '--store', str(filled.path), '--format', 'json'],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)['stats']['conversations'] == 4


def test_a_terminal_gets_a_live_progress_bar(filled: Filled) -> None:
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [*RECALL, 'reindex', '--store', str(filled.path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=follower,
        env=clean_env(COLUMNS='100'),
    )
    os.close(follower)
    screen = b''
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 1)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the process closed the terminal
                break
            if not chunk:
                break
            screen += chunk
        elif process.poll() is not None:
            break
    out, _ = process.communicate(timeout=30)
    os.close(leader)
    assert process.returncode == 0
    text = screen.decode(errors='replace')
    assert '\x1b[' in text and '━' in text, text
    assert re.search(r'(\d+)/\1', text), text
    assert re.fullmatch(rb'reindexed \d+ documents\n', out), out
