"""`python -m temporal_recall.worker` as an operator runs it: settings from the environment,
structured logs, health endpoints, a real conversation, and a clean exit on SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from temporal_recall import RunPromptInput, RunPromptWorkflow
from temporal_recall._devserver import free_port
from temporal_recall.testing import DevServer

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


async def test_worker_module_serves_a_run_and_stops_cleanly_on_sigterm(
    temporal_dev_server: DevServer, temporal_client: Client, tmp_path: Path
):
    queue = f'worker-main-{uuid.uuid4()}'
    port = free_port()
    env = {
        **os.environ,
        'TEMPORAL_ADDRESS': temporal_dev_server.address,
        'TEMPORAL_RECALL_TASK_QUEUE': queue,
        'TEMPORAL_RECALL_STORE': str(tmp_path / 'worker.db'),
        'TEMPORAL_RECALL_HEALTH_PORT': str(port),
    }
    process = subprocess.Popen(
        [sys.executable, '-m', 'temporal_recall.worker'], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        for _ in range(100):
            if await asyncio.to_thread(_get, f'http://127.0.0.1:{port}/readyz') == 200:
                break
            await asyncio.sleep(0.2)
        else:
            raise AssertionError('the worker never became ready')
        result = await temporal_client.execute_workflow(
            RunPromptWorkflow.run,
            RunPromptInput(prompt='Where is order B-77?', conversation_id='worker-main'),
            id=f'worker-main-{uuid.uuid4()}',
            task_queue=queue,
        )
        assert 'B-77' in result.output
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.to_thread(process.communicate, timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, stderr
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith('{')]
    messages = [line['msg'] for line in lines]
    assert 'worker started' in messages and 'worker stopped' in messages
