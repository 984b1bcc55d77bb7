"""`recall codec-server` as its own process: it serves the protocol with the tokens file's scopes."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..api._http import Client, free_port
from ..cli._support import recall_async
from .conftest import ACME, ACME_TEXT, GLOBEX, TOKENS, document, encoded_by_worker, messages_payload, payloads_of


async def test_recall_codec_server_serves_the_protocol(store_url: str, tmp_path: Path):
    original = messages_payload(ACME_TEXT)
    [encoded] = await encoded_by_worker(store_url, 'acme', [original])
    tokens = tmp_path / 'tokens.json'
    tokens.write_text(json.dumps(TOKENS))
    port = free_port()
    command = [sys.executable, '-m', 'temporal_recall.cli', 'codec-server', '--tokens', str(tokens)]
    command += ['--store', store_url, '--port', str(port), '--allow-origin', 'http://localhost:8233']
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    client = Client('127.0.0.1', port)
    try:
        deadline = time.monotonic() + 300  # a hang guard only: startup time is not what is tested
        while True:
            try:
                answer = client.post('/decode', token=ACME, json_body=document([encoded]))
                break
            except ConnectionRefusedError:
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, 'recall codec-server did not start listening'
                await asyncio.sleep(0.1)
        other = client.post('/decode', token=GLOBEX, json_body=document([encoded]))
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=20)
    assert answer.status == 200, answer.body
    assert payloads_of(answer.json()) == [original]
    assert payloads_of(other.json()) == [encoded]
    # uvicorn shuts down cleanly, then re-raises the SIGTERM it caught.
    assert process.returncode in (0, -signal.SIGTERM), stderr
    assert b'Application shutdown complete' in stderr


def test_a_bad_tokens_file_is_refused_before_serving(tmp_path: Path, store_url: str):
    tokens = tmp_path / 'tokens.json'
    tokens.write_text(json.dumps({'short': 'acme'}))
    ran = subprocess.run(
        [sys.executable, '-m', 'temporal_recall.cli', 'codec-server', '--tokens', str(tokens), '--store', store_url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 2, ran
    assert 'shorter than 16 characters' in ran.stderr


async def test_an_empty_tokens_file_is_reported_before_anything_is_announced(tmp_path: Path, store_url: str):
    tokens = tmp_path / 'empty.json'
    tokens.write_text('{}')

    ran = await recall_async('codec-server', '--tokens', tokens, '--store', store_url, '--port', '0')

    assert ran.returncode == 2, str(ran)
    assert ran.stderr.startswith('error: No API tokens are configured'), str(ran)
    assert 'press Ctrl-C' not in ran.stderr
