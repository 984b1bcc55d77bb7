"""`temporal workflow show --codec-endpoint` against the codec server shows the messages, in scope only."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
from typing import Any

import pytest

from temporal_recall._devserver import find_temporal_cli
from temporal_recall.testing import DevServer

from ..api._http import Client
from ._conversation import run_with_codec
from .agents import LEDGER_TEXT
from .conftest import ACME, GLOBEX

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


def _payload_text(value: Any) -> str:
    """The data of every payload in `temporal workflow show --output json` (base64 there), joined."""
    if isinstance(value, dict):
        found: dict[str, Any] = value  # pyright: ignore[reportUnknownVariableType]
        if isinstance(found.get('metadata'), dict) and isinstance(found.get('data'), str):
            return base64.b64decode(found['data']).decode('utf-8', 'replace')
        return '\n'.join(_payload_text(item) for item in found.values())
    if isinstance(value, list):
        return '\n'.join(_payload_text(item) for item in value)  # pyright: ignore[reportUnknownVariableType]
    return ''


async def _show(server: DevServer, workflow_id: str, *codec: str) -> str:
    command = [str(find_temporal_cli()), 'workflow', 'show', '--workflow-id', workflow_id, '--output', 'json']
    command += ['--address', server.address, '--namespace', server.namespace, *codec]
    ran = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    return _payload_text(json.loads(ran.stdout))


async def test_workflow_show_decodes_through_the_codec_server(
    temporal_dev_server: DevServer, store_url: str, codec_server: Client
):
    workflow_id = await run_with_codec(temporal_dev_server, store_url, 'acme')
    endpoint = ['--codec-endpoint', codec_server.base_url]

    plain = await _show(temporal_dev_server, workflow_id)
    decoded = await _show(temporal_dev_server, workflow_id, *endpoint, '--codec-auth', f'Bearer {ACME}')
    other_tenant = await _show(temporal_dev_server, workflow_id, *endpoint, '--codec-auth', f'Bearer {GLOBEX}')

    assert LEDGER_TEXT not in plain  # the history holds hashes only
    assert LEDGER_TEXT in decoded
    assert LEDGER_TEXT not in other_tenant
    assert '"$recall"' in plain
    assert other_tenant == plain  # another scope sees exactly the hashes
