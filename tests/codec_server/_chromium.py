"""Headless Chromium (Debian's `chromium` package) driven over the DevTools protocol on a pipe.

`--remote-debugging-pipe` makes Chromium read protocol commands from fd 3 and write answers and
events to fd 4, each a JSON object ended by a NUL byte. That needs no websocket client, no port and
no browser download: only the system browser, which `scripts/test` installs from Debian when asked.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ('Chromium', 'find_chromium')

_ON_FDS_3_AND_4 = """
import fcntl, os, sys
commands, answers = (fcntl.fcntl(int(fd), fcntl.F_DUPFD, 10) for fd in sys.argv[1:3])
os.dup2(commands, 3)
os.dup2(answers, 4)
os.execv(sys.argv[3], sys.argv[3:])
"""
"""Puts the two pipe ends on the fds Chromium expects, whatever numbers they have in this process."""


def find_chromium() -> str | None:
    for name in ('chromium', 'chromium-browser', 'google-chrome'):
        found = shutil.which(name)
        if found is not None:
            return found
    return None


class Chromium:
    """One headless browser with one page; every call blocks (run it with `asyncio.to_thread`)."""

    def __init__(self, executable: str, profile: Path) -> None:
        to_browser_read, self._to_browser = os.pipe()
        self._from_browser, from_browser_write = os.pipe()
        flags = [
            '--headless',
            '--remote-debugging-pipe',
            '--no-sandbox',  # the tests run as root in a container; the page is our own local UI
            '--disable-gpu',
            '--disable-dev-shm-usage',
            '--no-first-run',
            '--no-default-browser-check',
            f'--user-data-dir={profile}',
            '--window-size=1600,2400',
            'about:blank',
        ]
        self._process = subprocess.Popen(
            [sys.executable, '-c', _ON_FDS_3_AND_4, str(to_browser_read), str(from_browser_write), executable, *flags],
            pass_fds=(to_browser_read, from_browser_write),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._buffer = b''
        self._next_id = 0
        targets = self._call('Target.getTargets')['targetInfos']
        page = next(target for target in targets if target['type'] == 'page')
        self._session = self._call('Target.attachToTarget', {'targetId': page['targetId'], 'flatten': True})[
            'sessionId'
        ]
        for domain in ('Page', 'Runtime', 'Network'):
            self.call(f'{domain}.enable')

    def _call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {'id': self._next_id, 'method': method, 'params': params or {}}
        if session is not None:
            message['sessionId'] = session
        os.write(self._to_browser, json.dumps(message).encode() + b'\0')
        while True:
            answer = self._read()
            if answer.get('id') == self._next_id:
                if 'error' in answer:
                    raise RuntimeError(f'{method} failed: {answer["error"]}')
                return answer.get('result', {})

    def _read(self) -> dict[str, Any]:
        while b'\0' not in self._buffer:
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError('Chromium closed its DevTools pipe (it exited).')
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b'\0')
        return json.loads(message)

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A DevTools command on the page."""
        return self._call(method, params, self._session)

    def evaluate(self, expression: str) -> Any:
        result = self.call('Runtime.evaluate', {'expression': expression, 'returnByValue': True, 'awaitPromise': True})
        if 'exceptionDetails' in result:
            raise RuntimeError(f'{expression[:60]} raised: {result["exceptionDetails"]}')
        return result['result'].get('value')

    def navigate(self, url: str, *, within: float = 30) -> None:
        self.call('Page.navigate', {'url': url})
        deadline = time.monotonic() + within
        while self.evaluate('document.readyState') != 'complete' or self.evaluate('location.href') != url:
            if time.monotonic() > deadline:
                raise TimeoutError(f'{url} did not load within {within} s')
            time.sleep(0.1)

    def text(self) -> str:
        """The text the page shows (`innerText`: what is rendered, not hidden markup)."""
        try:
            return str(self.evaluate('document.body ? document.body.innerText : ""'))
        except RuntimeError:  # the page is being replaced (a form submitted): nothing shown yet
            return ''

    def wait_for_text(self, *wanted: str, within: float = 30) -> str:
        """Wait until the page shows one of `wanted`; returns the page text either way."""
        deadline = time.monotonic() + within
        while True:
            text = self.text()
            if any(item in text for item in wanted) or time.monotonic() > deadline:
                return text
            time.sleep(0.25)

    def wait_until_gone(self, unwanted: str, *, within: float = 60) -> str:
        """Wait until the page no longer shows `unwanted`; returns the page text either way (the caller asserts)."""
        deadline = time.monotonic() + within
        while True:
            text = self.text()
            if unwanted not in text or time.monotonic() > deadline:
                return text
            time.sleep(0.25)

    def screenshot(self, path: Path) -> None:
        data = self.call('Page.captureScreenshot', {'format': 'png', 'captureBeyondViewport': True})['data']
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, OSError):
            self._call('Browser.close')
        try:
            self._process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=10)
        finally:
            os.close(self._to_browser)
            os.close(self._from_browser)
