"""`recall stats --format json` answers exactly the keys the `recall` command's page lists, the same on both backends,
with one URL that never shows a password."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import ModelRequest, UserPromptPart

from ..store._support import Site, SqliteSite, open_site
from ._support import recall_async

PAGE = Path(__file__).resolve().parents[2] / 'docs' / 'operations' / 'recall' / 'index.md'
PASSWORD = 'not-shown-4f9c2a'


def readme_keys() -> list[str]:
    """The keys the `recall` command page's `recall stats` contract lists, in order."""
    found = re.search(r'^- `stats`: `\{"stats": \{(.*?)\}\}`', PAGE.read_text(), re.MULTILINE | re.DOTALL)
    assert found, 'docs/operations/recall/index.md lost its `stats` JSON contract'
    return re.findall(r'"(\w+)"', found[1])


def with_password(url: str) -> str:
    """`url` with a password (trust authentication ignores it), unless it has one already."""
    parts = urlsplit(url)
    if parts.password is not None:
        return url
    user, _, host = parts.netloc.rpartition('@')
    return urlunsplit(parts._replace(netloc=f'{user or "postgres"}:{PASSWORD}@{host}'))


@pytest.fixture(params=[pytest.param('sqlite'), pytest.param('postgres', marks=pytest.mark.postgres)])
async def site(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Site]:
    """A store of each backend holding one conversation."""
    async with open_site(request.param, tmp_path) as opened:
        store = await opened.open()
        try:
            prompt = ModelRequest(parts=[UserPromptPart('hello')])
            await store.save(Conversation(messages=[prompt], conversation_id='c1'), scope='acme')
        finally:
            await store.close()
        yield opened


async def test_stats_answers_the_readmes_keys_on_both_backends(site: Site) -> None:
    url = str(site.path) if isinstance(site, SqliteSite) else with_password(site.url)
    ran = await recall_async('stats', '--store', url, '--format', 'json')
    assert ran.returncode == 0, str(ran)
    stats = ran.json()['stats']

    assert list(stats) == readme_keys()
    assert (stats['conversations'], stats['entries']) == (1, 1)
    if isinstance(site, SqliteSite):
        assert stats['store_url'] == f'sqlite:///{site.path.absolute()}'
        assert (stats['path'], stats['schema']) == (str(site.path.absolute()), None)
    else:
        parts = urlsplit(url)
        assert stats['store_url'] == f'postgresql://{parts.username}@{parts.hostname}:{parts.port}{parts.path}'
        assert (stats['path'], stats['schema']) == (None, site.schema)
        assert (parts.password or PASSWORD) not in ran.stdout + ran.stderr
