"""`recall bodies stats` and `recall bodies prune`, in-process, on a real SQLite file and a real PostgreSQL schema."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ..store._support import AnyStore, Site, SqliteSite, open_site
from ..store.test_bodies import age, touched
from ._support import recall_async
from .test_cli import FORMATS, ok, parse, refused


@pytest.fixture(params=[pytest.param('sqlite'), pytest.param('postgres', marks=pytest.mark.postgres)])
async def site(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Site]:
    async with open_site(request.param, tmp_path) as opened:
        yield opened


@pytest.fixture
def url(site: Site) -> str:
    return str(site.path) if isinstance(site, SqliteSite) else site.url


@pytest.fixture
async def store(site: Site) -> AsyncIterator[AnyStore]:
    """Five bodies: `old-1` and `old-2` in acme and `old-1` in no scope untouched for 40 days, the others recent."""
    opened = await site.open()
    try:
        await opened.put_bodies('acme', {'old-1': b'a' * 10, 'old-2': b'b' * 20, 'new-1': b'c' * 30})
        await opened.put_bodies(None, {'old-1': b'd' * 40, 'new-1': b'e' * 50})
        for scope, digest in (('acme', 'old-1'), ('acme', 'old-2'), (None, 'old-1')):
            await age(opened, scope, digest, timedelta(days=40))
        await age(opened, 'acme', 'new-1', timedelta(days=20))
        yield opened
    finally:
        await opened.close()


async def test_bodies_stats_in_every_format(store: AnyStore, url: str) -> None:
    table, as_json, as_yaml, as_ndjson = [
        ok(await recall_async('bodies', 'stats', '--store', url, '--format', fmt)) for fmt in FORMATS
    ]
    scopes = as_json.json()['scopes']
    assert [(s['scope'], s['bodies'], s['bytes']) for s in scopes] == [(None, 2, 90), ('acme', 3, 60)]
    for scope in scopes:
        oldest = datetime.fromisoformat(scope['oldest_touched'])
        assert abs(oldest - (datetime.now(UTC) - timedelta(days=40))) < timedelta(minutes=1)
    assert parse(as_yaml, 'yaml') == {'scopes': scopes}
    assert as_ndjson.ndjson() == scopes
    assert [line.split()[:3] for line in table.stdout.splitlines()[-2:]] == [['-', '2', '90'], ['acme', '3', '60']]


async def test_bodies_prune_dry_run_then_prune(store: AnyStore, url: str) -> None:
    before = await touched(store)
    dry = ok(
        await recall_async('bodies', 'prune', '--older-than', '31d', '--retention', '30d', '--dry-run', '--store', url)
    )
    assert re.fullmatch(r'would delete 3 message bodies \(70 bytes\) untouched since \S+\n', dry.stdout), dry.stdout
    assert await touched(store) == before
    done = ok(await recall_async('bodies', 'prune', '--older-than', '31d', '--retention', '30d', '--store', url))
    assert re.fullmatch(r'deleted 3 message bodies \(70 bytes\) untouched since \S+\n', done.stdout), done.stdout
    assert set(await touched(store)) == {('s:acme', 'new-1'), ('n:', 'new-1')}


async def test_bodies_prune_refuses_a_window_shorter_than_retention_plus_a_day(store: AnyStore, url: str) -> None:
    before = await touched(store)
    for window in (
        ['--older-than', '30d', '--retention', '30d'],
        ['--older-than', '30d', '--retention', '30d', '--dry-run'],
    ):
        refused(
            await recall_async('bodies', 'prune', *window, '--store', url),
            2,
            'bodies untouched for 30d',
            'the retention 30d plus the 1d safety margin',
            'at least 31d',
        )
    refused(
        await recall_async('bodies', 'prune', '--older-than', 'soon', '--retention', '30d', '--store', url), 2, 'soon'
    )
    refused(await recall_async('bodies', 'prune', '--older-than', '31d', '--store', url), 2, '--retention')
    assert await touched(store) == before
