"""Worker processes for tests that kill one: started from `worker_process`, stopped with SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def spawn_worker(address: str, queue: str, store_url: str, **extra: str) -> subprocess.Popen[bytes]:
    """A `tests.workflows.worker_process` on `queue`; `extra` adds `RECALL_TEST_*` settings."""
    env = {
        **os.environ,
        'RECALL_TEST_ADDRESS': address,
        'RECALL_TEST_QUEUE': queue,
        'RECALL_TEST_STORE': store_url,
        **extra,
    }
    return subprocess.Popen([sys.executable, '-m', 'tests.workflows.worker_process'], env=env, cwd=ROOT)


def stop_worker(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (the worker drains), then SIGKILL if it has not left within 30 s."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
