"""Pruning message bodies against real histories: a workflow whose bodies are recent still replays, and
one whose bodies were pruned fails to decode by name, never silently.

A conversation runs with the codec on against the dev server (SQLite file or PostgreSQL schema);
other bodies of its scope are then aged past the window and pruned, and the exported history is
replayed with a fresh codec, whose only source of bodies is the store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from temporal_recall import message_codec_plugin
from temporal_recall.store import open_store
from temporal_recall.testing import DevServer, connect, export_history, replay

from ..codec_server._conversation import run_with_codec
from ..codec_server.agents import ledger_agent
from ..store._support import PostgresSite, SqliteSite, open_site
from ..store.test_bodies import age, touched

pytestmark = [pytest.mark.temporal, pytest.mark.slow]

WINDOW, RETENTION = timedelta(days=31), timedelta(days=30)


@pytest.fixture(params=[pytest.param('sqlite'), pytest.param('postgres', marks=pytest.mark.postgres)])
async def site(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqliteSite | PostgresSite]:
    async with open_site(request.param, tmp_path) as opened:
        yield opened


async def _replay(url: str, history: str) -> None:
    plugin = message_codec_plugin(url, scope='acme')  # a fresh cache: every body comes from the store
    try:
        await replay([history], agents=[ledger_agent], plugins=[plugin])
    finally:
        await plugin.codec.aclose()


async def test_prune_keeps_what_a_recent_history_needs_and_a_pruned_one_fails_by_name(
    temporal_dev_server: DevServer, site: SqliteSite | PostgresSite
) -> None:
    url = str(site.path) if isinstance(site, SqliteSite) else site.url
    store = await open_store(url)
    try:
        await store.put_bodies('acme', {'other-1': b'an old body of the same scope'})
        await store.put_bodies('globex', {'other-2': b'an old body of another scope'})
        workflow_id = await run_with_codec(temporal_dev_server, url, 'acme')
        history = await export_history(await connect(temporal_dev_server), workflow_id)
        others = {('s:acme', 'other-1'), ('s:globex', 'other-2')}
        own = set(await touched(store)) - others
        assert own  # the run stored its messages as bodies

        await age(store, 'acme', 'other-1', timedelta(days=40))
        await age(store, 'globex', 'other-2', timedelta(days=40))
        pruned = await store.prune_bodies(WINDOW, retention=RETENTION)
        assert pruned.bodies == 2
        assert set(await touched(store)) == own
        await _replay(url, history)  # raises on any replay failure

        for _, digest in own:
            await age(store, 'acme', digest, timedelta(days=40))
        assert (await store.prune_bodies(WINDOW, retention=RETENTION)).bodies == len(own)
        with pytest.raises(Exception, match=r"Message body [0-9a-f]{64} is not in the store for scope 'acme'"):
            await _replay(url, history)
    finally:
        await store.close()
