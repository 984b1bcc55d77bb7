"""The Temporal Web UI, in headless Chromium, shows a codec run's messages through the codec server.

The dev server serves the UI with `--ui-codec-endpoint` pointing at the codec server. The UI sends
its own OIDC token only, and only over https, so the tenant's token reaches the codec server as the
`recall-codec-token` cookie, set by the codec server's own sign-in form (`/session`), which the UI
sends with its codec requests when "include cross-origin credentials" is on (switched on here where
the UI's codec settings dialog keeps it: localStorage).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from temporal_recall.api import create_codec_app
from temporal_recall.testing import DevServer, connect, dev_server

from ..api._http import free_port, serving
from ._chromium import Chromium, find_chromium
from ._conversation import run_with_codec
from .agents import LEDGER_TEXT
from .conftest import ACME, GLOBEX, TOKENS

pytestmark = [pytest.mark.temporal, pytest.mark.slow]

BROWSER_MISSING = (
    "no Chromium on PATH: run TEMPORAL_RECALL_INSTALL_BROWSER=1 ./scripts/test to install Debian's chromium "
    '(as root, with apt-get; CI does so), or install a Chromium yourself'
)
"""The test's one line when it cannot run: the browser is a system package, installed only when asked."""

ARTIFACTS = Path(__file__).resolve().parents[2] / 'artifacts'
"""Screenshots land here (gitignored), so every run leaves the proof to look at."""

EXPAND_ACTIVITY_RESULTS = """
(() => {
  const rows = [...document.querySelectorAll('tr')].filter(row => row.innerText.includes('Activity Task Completed'));
  rows.forEach(row => row.click());
  return rows.length;
})()
"""
"""The event table shows a payload's first 60 characters; an expanded row shows all of it."""

SCROLL_TO = """
(() => {
  const found = document.evaluate(XPATH, document, null, 9, null).singleNodeValue;
  if (found) found.scrollIntoView({block: 'center'});
})()
"""

HASH = '"$recall"'
DECODING_FAILED = 'Decoding failed'
"""What the UI shows in a payload's place until its decode resolves, and after a decode that failed."""
"""How an encoded payload looks when the UI shows it undecoded."""


def _show_workflow(browser: Chromium, ui: str, codec: str, page: str, token: str | None) -> str:
    """The text of the workflow's event history page, its activity results expanded, as `token` sees it."""
    browser.call('Network.clearBrowserCookies')
    browser.navigate(f'{ui}/namespaces/default/workflows')
    settings = {'overrideRemoteCodecConfiguration': True, 'endpoint': codec, 'includeCredentials': True}
    for key, value in settings.items():
        browser.evaluate(f'localStorage.setItem({json.dumps(key)}, {json.dumps(json.dumps(value))})')
    if token is not None:  # sign in as a person would: the codec server's form sets its cookie
        browser.navigate(f'{codec}/session')
        browser.evaluate(f'document.querySelector("input[name=token]").value = {json.dumps(token)}')
        browser.evaluate('document.forms[0].submit()')
        assert 'Signed in' in browser.wait_for_text('Signed in', 'not one this codec server knows', within=15)
    browser.navigate(page)
    browser.wait_for_text('Activity Task Completed', within=30)
    expanded = browser.evaluate(EXPAND_ACTIVITY_RESULTS)
    assert expanded == 4, f'expected 4 activity results (history, model, tool, model), found {expanded}'
    # Either the decoded text or the hashes show once the codec server has answered.
    browser.wait_for_text(LEDGER_TEXT, HASH, within=30)
    if token is not None:
        # "Decoding failed" is the UI's placeholder until a decode resolves, not only a failure: read
        # the page once it is gone, and it must be gone (the codec server answers a known token 200).
        settled = browser.wait_until_gone(DECODING_FAILED, within=60)
        assert DECODING_FAILED not in settled, f'the UI still shows {DECODING_FAILED!r} with a known token'
    else:
        time.sleep(1)  # without a token the codec server answers 401: the placeholder may stay
    wanted = LEDGER_TEXT if LEDGER_TEXT in browser.text() else '$recall'
    browser.evaluate(SCROLL_TO.replace('XPATH', json.dumps(f'//*[contains(text(), "{wanted}")]')))  # for the screenshot
    return browser.text()


async def test_the_web_ui_shows_decoded_messages_with_the_tenants_token_only(store_url: str, tmp_path: Path):
    executable = find_chromium()
    if executable is None:
        pytest.skip(BROWSER_MISSING)
    codec_port = free_port()
    codec = f'http://127.0.0.1:{codec_port}'
    ARTIFACTS.mkdir(exist_ok=True)
    shown: dict[str, str] = {}
    server: DevServer
    async with dev_server(ui=True, ui_codec_endpoint=codec) as server:
        ui = f'http://127.0.0.1:{server.ui_port}'
        workflow_id = await run_with_codec(server, store_url, 'acme')
        run_id = (await (await connect(server)).get_workflow_handle(workflow_id).describe()).run_id
        page = f'{ui}/namespaces/default/workflows/{workflow_id}/{run_id}/history'
        with serving(create_codec_app(store_url, tokens=TOKENS, allowed_origins=[ui]), port=codec_port):
            browser = await asyncio.to_thread(Chromium, executable, tmp_path / 'chromium-profile')
            try:
                for name, token in (('acme-token', ACME), ('globex-token', GLOBEX), ('no-token', None)):
                    shown[name] = await asyncio.to_thread(_show_workflow, browser, ui, codec, page, token)
                    await asyncio.to_thread(browser.screenshot, ARTIFACTS / f'web-ui-codec-{name}.png')
            finally:
                await asyncio.to_thread(browser.close)
    print(f'screenshots: {ARTIFACTS}/web-ui-codec-*.png')

    assert LEDGER_TEXT in shown['acme-token']
    for name in ('globex-token', 'no-token'):
        assert LEDGER_TEXT not in shown[name], name
        assert HASH in shown[name], name  # the payloads are on the page, as the hashes the history holds
