"""A writer killed with SIGKILL mid-save leaves a sound database holding only whole saves (SQLite and PostgreSQL)."""

from __future__ import annotations

import re
import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from pydantic_ai import messages as m

from temporal_recall.store import SqliteConversationStore
from temporal_recall.text._documents import searchable_text

from . import _crash_writer
from ._support import AnyStore, PostgresSite, index_problems, postgres_url, problems_of

WRITER = Path(_crash_writer.__file__)
ROUNDS = (17, 11)
"""How many saves each round lets finish before the kill lands (during a later one)."""

_TAG = re.compile(r'^save (\d+) part (\d+) ')


def run_and_kill(location: Path | str, start: int, after: int) -> int:
    """Run the writer until it reports `after` more saves, SIGKILL it, return the last save it reported."""
    process = subprocess.Popen(
        [sys.executable, str(WRITER), str(location), str(start)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    last = start
    try:
        assert process.stdout is not None
        for line in process.stdout:
            last = int(line)
            if last - start >= after:
                break
        process.send_signal(signal.SIGKILL)
    finally:
        process.kill()
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == -signal.SIGKILL, stderr
    return last


def tags(message: m.ModelMessage) -> tuple[int, int]:
    found = _TAG.match(searchable_text(message))
    assert found is not None, searchable_text(message)[:80]
    return int(found.group(1)), int(found.group(2))


@pytest.mark.slow
async def test_killed_writer_leaves_only_whole_saves(db_path: Path) -> None:
    start = 0
    reported = 0
    for after in ROUNDS:
        reported = run_and_kill(db_path, start, after)
        start = reported + 1  # a save killed mid-way may or may not have committed; skip its number either way

    with closing(sqlite3.connect(db_path)) as db:
        assert db.execute('PRAGMA integrity_check').fetchall() == [('ok',)]
        assert db.execute('PRAGMA foreign_key_check').fetchall() == []

    async with await SqliteConversationStore.open(db_path) as store:
        await assert_whole_saves(store)
    assert index_problems(db_path) == []


async def assert_whole_saves(store: AnyStore) -> None:
    """Every stored message belongs to a whole save, and at least as many saves as were reported landed."""
    saves: set[int] = set()
    total = 0
    for record in await store.list_conversations():
        loaded = await store.load(record.conversation_id)
        assert loaded is not None
        assert len(loaded.messages) % _crash_writer.GROUP == 0
        for begin in range(0, len(loaded.messages), _crash_writer.GROUP):
            group = [tags(message) for message in loaded.messages[begin : begin + _crash_writer.GROUP]]
            n = group[0][0]
            assert group == [(n, part) for part in range(_crash_writer.GROUP)]
            assert loaded.messages[begin : begin + _crash_writer.GROUP] == _crash_writer.group(n)
            saves.add(n)
        total += len(loaded.messages)
    stats = await store.stats()
    assert stats.entries == total  # no entry of a torn save survived
    assert len(saves) >= sum(ROUNDS)
    report = await store.check()  # what `recall check` runs
    assert report.clean, '\n'.join(map(str, report.findings))
    assert report.entries == total


@pytest.mark.slow
@pytest.mark.postgres
async def test_killed_writer_leaves_only_whole_saves_in_postgres() -> None:
    """The server rolls back the transaction of a client killed mid-write: only whole saves remain."""
    site = PostgresSite(postgres_url())
    try:
        await (await site.open()).close()  # create the schema first, so every round kills a writer mid-save
        start = 0
        for after in ROUNDS:
            start = run_and_kill(site.url, start, after) + 1
        async with await site.open() as store:
            await assert_whole_saves(store)
            assert await problems_of(store) == []
    finally:
        await site.close()
