"""One SQLite file, many stores, many processes: no committed write is ever lost.

POSIX advisory locks belong to the process, so a process that opens and closes the database file
outside SQLite drops the locks its own connections hold. Another process then takes itself for the
last connection, checkpoints and deletes the write-ahead log, and commits vanish. These tests hold
two stores on one file in this process (as a worker with `RecallPlugin` and `message_codec_plugin`
does) while other processes open, write and close the same file, and read everything back from a
fresh process.
"""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from temporal_recall.store import SqliteConversationStore

from ._shared_file_process import key
from ._support import index_problems

ROOT = Path(__file__).resolve().parents[2]
PROCESS = [sys.executable, '-m', 'tests.store._shared_file_process']


def other_process(path: Path, command: str, *names: str) -> list[str]:
    """Run `_shared_file_process` to its end: what it saw of `names`, after doing `command`."""
    done = subprocess.run(
        [*PROCESS, str(path), command, *names],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def put(store: SqliteConversationStore, name: str) -> None:
    await store.put_bodies(None, {key(name): name.encode()})


async def test_the_reported_reproduction_keeps_every_committed_body(tmp_path: Path) -> None:
    """Two stores in one process write; another process opens, writes and closes; nothing is lost."""
    path = tmp_path / 'r.db'
    first, second = await SqliteConversationStore.open(path), await SqliteConversationStore.open(path)
    committed: list[str] = []
    try:
        for round_ in range(4):
            await put(first if round_ % 2 else second, f'a{round_}')
            committed.append(f'a{round_}')
            assert other_process(path, 'get') == []  # opens and closes: the old way to lose the log
            assert other_process(path, 'put', f'c{round_}') == [f'c{round_}']
            committed.append(f'c{round_}')
            await put(second if round_ % 2 else first, f'd{round_}')
            committed.append(f'd{round_}')
            # A fresh process sees every commit of both processes while this one still holds the file.
            assert other_process(path, 'get', *committed) == sorted(committed)
            # And so does each store of this process.
            for store in (first, second):
                found = await store.get_bodies(None, [key(name) for name in committed])
                assert sorted(body.decode() for body in found.values()) == sorted(committed)
    finally:
        await first.close()
        await second.close()
    assert other_process(path, 'get', *committed) == sorted(committed)
    with closing(sqlite3.connect(path)) as db:
        assert db.execute('PRAGMA integrity_check').fetchall() == [('ok',)]


@pytest.mark.slow
async def test_a_writer_with_two_stores_killed_at_random_points_loses_nothing(tmp_path: Path) -> None:
    """SIGKILL a process that writes through two stores on one file while other processes write beside it."""
    path = tmp_path / 'r.db'
    chance = random.Random()
    seed = chance.randrange(1 << 32)
    chance.seed(seed)
    start, reported = 0, -1
    others: list[str] = []
    done: list[int] = []
    phase = tmp_path / 'phase'

    def set_phase(text: str) -> None:  # atomically: the writer reads the file while this writes it
        (tmp_path / 'phase.new').write_text(text)
        (tmp_path / 'phase.new').replace(phase)

    for round_ in range(3):
        set_phase(f'{round_}-before')
        writer = subprocess.Popen(
            [*PROCESS, str(path), 'write-loop', str(start), str(phase)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        try:
            assert writer.stdout is not None
            before, after = chance.randrange(1, 6), chance.randrange(1, 8)
            for line in writer.stdout:
                number, seen_phase = line.split()
                reported = int(number)
                done.append(reported)
                if seen_phase == f'{round_}-before' and reported - start + 1 == before:
                    # Another process comes and goes while this one holds the file open.
                    name = f'other-{round_}'
                    assert other_process(path, 'put', name) == [name]
                    others.append(name)
                    set_phase(f'{round_}-after')
                elif seen_phase == f'{round_}-after':
                    after -= 1
                    if after == 0:
                        break
            writer.send_signal(signal.SIGKILL)
        finally:
            writer.kill()
            _, stderr = writer.communicate(timeout=60)
        assert writer.returncode == -signal.SIGKILL, f'seed {seed}: {stderr}'
        start = reported + 2  # the write under way at the kill may or may not have committed

    with closing(sqlite3.connect(path)) as db:
        assert db.execute('PRAGMA integrity_check').fetchall() == [('ok',)], f'seed {seed}'
    bodies = [f'loop-body-{n}' for n in done]
    assert other_process(path, 'get', *others) == sorted(others), f'seed {seed}'
    assert other_process(path, 'get', *bodies) == sorted(bodies), f'seed {seed}'
    async with await SqliteConversationStore.open(path) as store:
        stored = {record.conversation_id for record in await store.list_conversations()}
        assert {f'loop-{n}' for n in done} <= stored, f'seed {seed}'
        report = await store.check()
        assert report.clean, f'seed {seed}: {report.findings}'
    assert index_problems(path) == [], f'seed {seed}'
