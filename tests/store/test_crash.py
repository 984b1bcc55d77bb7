"""A writer killed with SIGKILL mid-save leaves a sound database holding only whole saves."""

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

from temporal_recall.search._documents import searchable_text
from temporal_recall.store import SqliteConversationStore

from . import _crash_writer
from ._support import index_problems

WRITER = Path(_crash_writer.__file__)
ROUNDS = (17, 11)
"""How many saves each round lets finish before the kill lands (during a later one)."""

_TAG = re.compile(r'^save (\d+) part (\d+) ')


def run_and_kill(path: Path, start: int, after: int) -> int:
    """Run the writer until it reports `after` more saves, SIGKILL it, return the last save it reported."""
    process = subprocess.Popen(
        [sys.executable, str(WRITER), str(path), str(start)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
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
    assert index_problems(db_path) == []
