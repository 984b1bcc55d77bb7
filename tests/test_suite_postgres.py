"""The test suite finds its PostgreSQL by itself, and says in one line what it could not run without one.

`./scripts/test` with no `TEMPORAL_RECALL_TEST_POSTGRES_URL` uses a database of its own on a local
server (tests/store/_support.py `postgres_server`); with none there, the PostgreSQL tests skip and the
run ends with one line of how many and why (tests/conftest.py), not a line per test.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import pytest

from temporal_recall._devserver import free_port

from .store._support import POSTGRES_URL_VARIABLE, local_postgres, postgres_url

ROOT = Path(__file__).resolve().parents[1]
SMALL_POSTGRES_FILE = 'tests/store/test_postgres.py'
"""A quick file of tests of which some need a server and some do not."""


def _pytest(environment: dict[str, str]) -> str:
    """Run the PostgreSQL tests of `SMALL_POSTGRES_FILE` in their own pytest process, without the URL variable."""
    env = {k: v for k, v in os.environ.items() if k != POSTGRES_URL_VARIABLE and not k.startswith('PG')}
    result = subprocess.run(
        [sys.executable, '-m', 'pytest', SMALL_POSTGRES_FILE, '-q', '-p', 'no:xdist', '-p', 'no:cacheprovider'],
        cwd=ROOT,
        env={**env, **environment},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _counts(output: str) -> dict[str, int]:
    return {word: int(number) for number, word in re.findall(r'(\d+) (passed|skipped|failed)', output.splitlines()[-1])}


@pytest.mark.slow
def test_without_a_server_the_postgres_tests_skip_in_one_line():
    output = _pytest({'PGHOST': '127.0.0.1', 'PGPORT': str(free_port())})  # a port nothing listens on

    counts = _counts(output)
    assert counts['skipped'] >= 10 and counts['passed'] >= 1, output  # the tests that need no server still ran
    mentions = [line for line in output.splitlines() if 'PostgreSQL' in line or 'SKIPPED' in line]
    assert len(mentions) == 1, output
    assert mentions[0].startswith(f'SKIPPED [{counts["skipped"]}] '), output
    assert 'no PostgreSQL server' in mentions[0] and 'PGPORT' in mentions[0], output
    assert POSTGRES_URL_VARIABLE in mentions[0], output


@pytest.mark.slow
@pytest.mark.postgres
def test_with_a_local_server_and_no_url_the_postgres_tests_run():
    server = urlsplit(postgres_url())
    output = _pytest(
        {'PGHOST': server.hostname or '', 'PGPORT': str(server.port or 5432), 'PGUSER': server.username or ''}
    )

    assert 'skipped' not in output and 'PostgreSQL' not in output, output
    assert _counts(output)['passed'] >= 11, output


@pytest.mark.slow
@pytest.mark.postgres
async def test_a_local_server_gets_a_database_of_the_tests_own_created_once():
    server = urlsplit(postgres_url())
    host, port, user = server.hostname or '', str(server.port or 5432), server.username or ''
    database = f'temporal_recall_t_{uuid.uuid4().hex[:12]}'
    admin = await asyncpg.connect(f'postgresql://{user}@{host}:{port}/postgres')
    try:
        found = local_postgres(host, port, user, database)
        assert found.url == f'postgresql://{user}@{host}:{port}/{database}'
        assert local_postgres(host, port, user, database) == found  # there already: used as it is
        assert await admin.fetchval('SELECT count(*) FROM pg_database WHERE datname = $1', database) == 1
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{database}"')
        await admin.close()


def test_no_server_says_where_it_looked_and_what_to_set():
    port = free_port()

    found = local_postgres('127.0.0.1', str(port), 'postgres')

    assert found.url is None
    assert f'none at 127.0.0.1:{port}' in found.missing
    assert 'PGHOST, PGPORT and PGUSER' in found.missing and f'or set {POSTGRES_URL_VARIABLE}' in found.missing
