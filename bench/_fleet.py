"""Worker processes started as an operator starts them: `recall worker --store URL`, configured from the environment.

Each worker serves `bench/fleet_agent.py`'s three agents (`TEMPORAL_RECALL_AGENTS`) on one task
queue, and answers `/readyz` on a port of its own, which is how `start` knows it polls. `stop` sends
SIGTERM (the worker drains and exits) and SIGKILLs what is still running after `STOP_SECONDS`;
`kill` is the crash a fault run needs.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from temporal_recall._devserver import free_port

__all__ = ('AGENTS', 'Fleet')

ROOT = Path(__file__).resolve().parents[1]
AGENTS = 'bench.fleet_agent:without_recall,bench.fleet_agent:with_recall,bench.fleet_agent:nothing_stored'
READY_SECONDS = 120.0
"""How long a worker may take to import, connect and poll (a loaded 2-core machine is slow to import)."""
STOP_SECONDS = 30.0
"""How long an idle worker may take to drain and exit after SIGTERM before it is killed."""


def _recall_command() -> list[str]:
    """The `recall` entry point installed next to this interpreter (what an operator runs)."""
    installed = Path(sys.executable).parent / 'recall'
    return [str(installed)] if installed.exists() else [sys.executable, '-m', 'temporal_recall.cli']


@dataclass
class Worker:
    process: subprocess.Popen[bytes]
    health_port: int
    log: Path

    def tail(self, lines: int = 20) -> str:
        try:
            return '\n'.join(self.log.read_text(errors='replace').splitlines()[-lines:])
        except OSError:
            return ''


@dataclass
class Fleet:
    """Worker processes of one store and one task queue on one Temporal server."""

    temporal_address: str
    store_url: str
    task_queue: str
    logs: Path
    workers: list[Worker] = field(default_factory=list[Worker])
    started: int = 0

    def _environment(self, health_port: int) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(('TEMPORAL_RECALL_', 'TEMPORAL_'))}
        env.update(
            TEMPORAL_ADDRESS=self.temporal_address,
            TEMPORAL_NAMESPACE='default',
            TEMPORAL_RECALL_AGENTS=AGENTS,
            TEMPORAL_RECALL_TASK_QUEUE=self.task_queue,
            TEMPORAL_RECALL_HEALTH_PORT=str(health_port),
            TEMPORAL_RECALL_LOG_LEVEL='WARNING',
            PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get('PYTHONPATH')])),
        )
        return env

    def _spawn(self) -> Worker:
        port = free_port()
        self.started += 1
        log = self.logs / f'worker-{self.started}.log'
        with log.open('wb') as out:
            process = subprocess.Popen(
                [*_recall_command(), 'worker', '--store', self.store_url],
                env=self._environment(port),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        worker = Worker(process, port, log)
        self.workers.append(worker)
        return worker

    async def start(self, count: int) -> None:
        """Start `count` more workers and wait until each is ready."""
        spawned = [self._spawn() for _ in range(count)]
        await asyncio.gather(*(self._ready(worker) for worker in spawned))

    async def _ready(self, worker: Worker) -> None:
        deadline = time.monotonic() + READY_SECONDS
        url = f'http://127.0.0.1:{worker.health_port}/readyz'
        while time.monotonic() < deadline:
            if worker.process.poll() is not None:
                raise RuntimeError(
                    f'worker {worker.process.pid} exited with status {worker.process.returncode} before it was '
                    f'ready; its log ({worker.log}) ends:\n{worker.tail()}'
                )
            if await asyncio.to_thread(_answers, url):
                return
            await asyncio.sleep(0.2)
        raise RuntimeError(f'worker {worker.process.pid} was not ready within {READY_SECONDS:.0f} s:\n{worker.tail()}')

    async def kill(self, index: int = 0) -> int:
        """SIGKILL one running worker (a crash: nothing drains); returns its pid."""
        worker = self.workers.pop(index)
        worker.process.send_signal(signal.SIGKILL)
        await asyncio.to_thread(worker.process.wait)
        return worker.process.pid

    async def stop(self) -> list[str]:
        """SIGTERM every worker, wait for each to drain and exit, SIGKILL any that does not.

        Returns what went wrong: a worker that needed SIGKILL or exited with a status other than 0
        (SIGTERM's documented one), with the end of its log.
        """
        for worker in self.workers:
            if worker.process.poll() is None:
                worker.process.send_signal(signal.SIGTERM)
        problems: list[str] = []
        for worker in self.workers:
            try:
                status = await asyncio.to_thread(worker.process.wait, STOP_SECONDS)
            except subprocess.TimeoutExpired:
                worker.process.kill()
                await asyncio.to_thread(worker.process.wait)
                problems.append(f'worker {worker.process.pid} did not stop within {STOP_SECONDS:.0f} s of SIGTERM')
                continue
            if status != 0:
                problems.append(f'worker {worker.process.pid} exited with status {status}:\n{worker.tail()}')
        self.workers.clear()
        return problems


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False
