"""Commands that read never create a store, on either backend; one message for a `sqlite://` URL with a host."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest

from temporal_recall.store import open_store

from ..store._support import postgres_url
from ._support import recall_async, support_agent

READ_COMMANDS = [
    ['stats'],
    ['conversations'],
    ['show', 'support-42'],
    ['search', 'support-42', 'order'],
    ['search', 'all', 'order'],
    ['check'],
    ['reindex'],
    ['delete', 'support-42'],
    ['bodies', 'stats'],
    ['bodies', 'prune', '--older-than', '40d', '--retention', '30d', '--dry-run'],
]


async def _tables(url: str) -> int:
    schema = url.partition('schema=')[2].partition('&')[0]
    connection = await asyncpg.connect(postgres_url())
    try:
        return int(
            await connection.fetchval(
                'SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = $1', schema or 'temporal_recall'
            )
        )
    finally:
        await connection.close()


@pytest.mark.parametrize('command', READ_COMMANDS, ids=[' '.join(c[:2]) for c in READ_COMMANDS])
async def test_a_read_command_creates_no_store(any_store_url: str, command: list[str]) -> None:
    ran = await recall_async(*command, '--store', any_store_url)

    assert ran.returncode == 1, str(ran)
    assert ran.stderr.startswith('error: no store '), str(ran)
    assert '--store' in ran.stderr and 'TEMPORAL_RECALL_STORE' in ran.stderr
    if any_store_url.startswith('postgresql://'):
        assert await _tables(any_store_url) == 0, 'the empty schema was left empty'
    else:
        assert not Path(any_store_url).exists()


async def test_a_sqlite_url_with_a_host_part_gets_the_openers_message(tmp_path: Path) -> None:
    ran = await recall_async('conversations', '--store', 'sqlite://myapp.db', cwd=tmp_path)

    assert ran.returncode == 2, str(ran)
    assert 'has a host part; write sqlite:///relative/path.db' in ran.stderr, str(ran)
    assert '//myapp.db' not in ran.stderr.replace("'sqlite://myapp.db'", '')


async def test_a_relative_sqlite_url_shows_the_absolute_path_and_the_four_slash_form(tmp_path: Path) -> None:
    ran = await recall_async('conversations', '--store', 'sqlite:///tmp/nowhere/x.db', cwd=tmp_path)

    assert ran.returncode == 1, str(ran)
    assert f'relative to the working directory: {tmp_path / "tmp/nowhere/x.db"}' in ran.stderr, str(ran)
    assert 'for /tmp/nowhere/x.db write sqlite:////tmp/nowhere/x.db' in ran.stderr, str(ran)


async def test_counts_of_one_are_singular(tmp_path: Path) -> None:
    store = await open_store(tmp_path / 'one.db')
    try:
        result = await support_agent().run('Hello there', conversation_id='only-1')
        await store.save(result)
    finally:
        await store.close()

    checked = await recall_async('check', '--store', tmp_path / 'one.db')
    shown = await recall_async('show', 'only-1', '--store', tmp_path / 'one.db')

    assert checked.returncode == 0, str(checked)
    assert checked.stdout.startswith('clean: checked 1 conversation, 2 entries, 2 documents, '), checked.stdout
    assert ', 2 messages, 0 branches left)' in shown.stdout, shown.stdout
