"""The worker process: connect, serve until SIGTERM or SIGINT, then drain and exit.

Startup problems an operator can fix end the process with one line on stderr that names what was
tried and what to check, and no traceback: exit status 2 for a setting that cannot work (no agents,
a bad port), 1 for what cannot be reached or opened (the Temporal server, the store, the namespace).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import logging
import re
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from pydantic_ai.agent.abstract import AbstractAgent
from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
from temporalio.client import Client
from temporalio.worker import Worker

from .._exit_status import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_USAGE, exit_without_finalizing
from .._store_provider import StoreProvider
from ..errors import ConfigurationError, RecallError
from ..settings import DEMO_AGENT, DEMO_STORE, ENVIRONMENT_VARIABLES, Settings
from ..store import sqlite_path
from ._build import build_worker, import_agents

__all__ = ('JsonLogFormatter', 'configure_logging', 'freeze_startup_heap', 'main', 'run_worker', 'worker_agents')

log = logging.getLogger('temporal_recall.worker')

GRACEFUL_SHUTDOWN = timedelta(seconds=90)
CONNECT_TIMEOUT = 10.0
"""Seconds to wait for the Temporal frontend before giving up with a one-line error."""


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line, for log shippers."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            'ts': time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(record.created)) + f'.{int(record.msecs):03d}Z',
            'level': record.levelname.lower(),
            'logger': record.name,
            'msg': record.getMessage(),
        }
        line.update(getattr(record, 'fields', {}))
        if record.exc_info:
            line['exc'] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLogFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


async def _event_first(task: asyncio.Task[Any], event: asyncio.Event) -> bool:
    """Wait until `task` ends or `event` is set; `True` when the event came first (`task` goes on)."""
    waiter = asyncio.create_task(event.wait())
    done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    return waiter in done


def _reason(error: BaseException) -> str:
    """The useful part of a Temporal core error, which nests Rust debug output."""
    text = str(error)
    found = re.search(r'message: "([^"]+)"', text) or re.search(r'ConnectError\("([^"]+)"', text)
    return found.group(1) if found else text.splitlines()[0][:300] if text else type(error).__name__


def _without_password(url: str) -> str:
    return re.sub(r'//[^@/]*@', '//', url)


async def _connect(settings: Settings, plugins: list[Any], runtime: Any) -> Client:
    address = settings.temporal.get('target_host', 'localhost:7233')
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT):
            return await Client.connect(**settings.temporal, plugins=plugins, runtime=runtime)
    except (RuntimeError, TimeoutError, OSError) as error:
        reason = f'no answer within {CONNECT_TIMEOUT:.0f} s' if isinstance(error, TimeoutError) else _reason(error)
        raise RecallError(
            f'cannot reach Temporal at {address} ({reason}); check that the server is running there '
            'and that TEMPORAL_ADDRESS (and TEMPORAL_NAMESPACE, TLS, API key) are right.'
        ) from None


async def _open_store(settings: Settings) -> StoreProvider:
    store = StoreProvider(settings.store_url)
    try:
        await store.get()
    except (RecallError, OSError) as error:
        raise RecallError(
            f'cannot open the store {_without_password(settings.store_url)}: {error} Check TEMPORAL_RECALL_STORE.'
        ) from None
    return store


READINESS_PROBE = 'temporal-recall-readiness-probe'
"""The conversation `/readyz` reads: it need not exist, the read proves the server and the schema answer."""


async def _store_answers(store: StoreProvider) -> None:
    """Raise unless the store answers one small read, through its protocol, like any activity's."""
    await (await store.get()).read_record(READINESS_PROBE)


def worker_agents(settings: Settings, *, demo: bool = False) -> tuple[str, ...]:
    """The agents a worker process serves: `TEMPORAL_RECALL_AGENTS`, and the demo agent when asked
    for (`--demo`) or when the store is the demo's (`DEMO_STORE`).

    A worker without agents would serve the scripted demo agent, which would then answer real prompts
    into a real store; none at all is refused before anything connects.

    Raises:
        ConfigurationError: No agents, and neither `demo` nor the demo's store.
    """
    path = sqlite_path(settings.store_url)
    if demo or (path is not None and path.resolve() == DEMO_STORE.resolve()):
        return (*settings.agents, *(() if DEMO_AGENT in settings.agents else (DEMO_AGENT,)))
    if not settings.agents:
        raise ConfigurationError(
            'no agents to serve: set TEMPORAL_RECALL_AGENTS to your agents as module:attribute, comma-separated '
            '(TEMPORAL_RECALL_AGENTS=myapp.agents:agent), or pass --demo to serve the scripted demo agent.'
        )
    return settings.agents


async def run_worker(settings: Settings, *, stop: asyncio.Event | None = None, demo: bool = False) -> None:
    """Run a worker until `stop` is set (or SIGTERM/SIGINT arrives), then shut down gracefully.

    It serves `worker_agents(settings, demo=demo)`. SIGTERM drains in-flight activities and returns.
    SIGINT drains too, and a second SIGINT stops at once; either way it ends by raising
    `KeyboardInterrupt`, so the process exits 130 as interrupted. Once the worker is built, what the
    process holds is frozen out of later garbage collections (`freeze_startup_heap`): call it in a
    process of its own, as `recall worker` does.
    """
    from .._metrics import prometheus_runtime

    shutdown = _Shutdown(stop or asyncio.Event())
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, shutdown.on_signal, signum)
    agents = import_agents(worker_agents(settings, demo=demo))
    runtime = None if settings.metrics_port is None else prometheus_runtime(f'0.0.0.0:{settings.metrics_port}')
    plugins: list[Any] = [PydanticAIPlugin()]
    codec_plugin = None
    if settings.message_codec:
        from ..codec import message_codec_plugin

        codec_plugin = message_codec_plugin(settings.store_url)
        plugins.append(codec_plugin)
    client = await _connect(settings, plugins, runtime)
    store = await _open_store(settings)
    worker = build_worker(
        client,
        task_queue=settings.task_queue,
        agents=agents,
        store=store,
        embedder=settings.embedder,
        # Longer than the 60 s activity timeout, shorter than the deployments' 120 s grace period:
        # SIGTERM lets running activities finish before the process exits.
        graceful_shutdown_timeout=GRACEFUL_SHUTDOWN,
    )
    freeze_startup_heap()
    health: contextlib.AbstractAsyncContextManager[Any] = contextlib.nullcontext()
    if settings.health_port is not None:
        from ._health import serve_health

        health = serve_health(
            settings.health_port,
            ready=lambda: worker.is_running and not shutdown.draining,
            store=lambda: _store_answers(store),
        )
    try:
        async with health:
            _log_started(settings, agents)
            await _serve(worker, shutdown, settings)
    finally:
        await store.aclose()
        if codec_plugin is not None:
            await codec_plugin.codec.aclose()
    log.info('worker stopped', extra={'fields': {}})
    if shutdown.interrupted:
        raise KeyboardInterrupt  # exit status 130, as every interrupted command


def freeze_startup_heap() -> None:
    """Collect the garbage of startup, then keep what survives out of every later collection (`gc.freeze`).

    What a worker holds once it is built (modules, pydantic schemas and validators, the agents, the
    client) lives as long as the process. Left to the collector, every full collection walks all of
    it again: about 100 ms per collection in a fleet worker, several times per batch of 48 workflows,
    and more often the more a step allocates. Frozen, a full collection walks only what came after:
    15-20 ms. Objects frozen are still freed when nothing refers to them; only a reference cycle among
    them is never collected, and the collection just before catches startup's.
    `scripts/bench_fleet.py`, docs/benchmarks/history.md (2026-12-05, night) has the measurement.
    """
    gc.collect()
    gc.freeze()


@dataclass
class _Shutdown:
    """How a worker is asked to stop, and how far it got."""

    stop: asyncio.Event
    """Set by SIGTERM, SIGINT or the caller: drain in-flight activities, then return."""
    at_once: asyncio.Event = field(default_factory=asyncio.Event)
    """Set by a second SIGINT while draining: the operator will not wait."""
    interrupted: bool = False
    """Whether a SIGINT arrived: the worker then ends by raising `KeyboardInterrupt`."""
    draining: bool = False
    """Whether the worker is draining (no longer ready, for the health endpoint)."""

    def on_signal(self, signum: signal.Signals) -> None:
        self.interrupted = self.interrupted or signum == signal.SIGINT
        if self.stop.is_set() and signum == signal.SIGINT:
            self.at_once.set()  # Ctrl-C again while draining: the operator will not wait
        self.stop.set()


def _log_started(settings: Settings, agents: Sequence[AbstractAgent[Any, Any]]) -> None:
    log.info(
        'worker started',
        extra={
            'fields': {
                'task_queue': settings.task_queue,
                'temporal': settings.temporal.get('target_host'),
                'agents': [agent.name for agent in agents],
                'store': _without_password(settings.store_url),
                'metrics_port': settings.metrics_port,
                'startup_objects_frozen': gc.get_freeze_count(),  # `freeze_startup_heap`
            }
        },
    )


async def _serve(worker: Worker, shutdown: _Shutdown, settings: Settings) -> None:
    """Run `worker` until it ends or `shutdown.stop` is set, then drain it (or stop at once when asked)."""
    run = asyncio.create_task(worker.run())
    if await _event_first(run, shutdown.stop):
        log.info('shutting down: finishing in-flight activities (Ctrl-C again to stop at once)', extra={'fields': {}})
        shutdown.draining = True
        stopping = asyncio.create_task(worker.shutdown())
        if await _event_first(stopping, shutdown.at_once):
            log.warning(
                'stopping at once: in-flight activities are cancelled, and Temporal retries them',
                extra={'fields': {}},
            )
            raise KeyboardInterrupt
    try:
        await run
    except RuntimeError as error:
        if 'validation failed' not in str(error).lower():
            raise
        raise RecallError(
            f'Temporal at {settings.temporal.get("target_host")} refused the worker ({_reason(error)}); '
            f'check that namespace {settings.temporal.get("namespace", "default")!r} exists '
            '(TEMPORAL_NAMESPACE).'
        ) from None


def _parser() -> argparse.ArgumentParser:
    settings = '\n'.join(f'  {name:32} {meaning}' for name, meaning in ENVIRONMENT_VARIABLES.items())
    parser = argparse.ArgumentParser(
        prog='temporal-recall-worker',
        description='Run a temporal-recall Temporal worker until SIGTERM or SIGINT, then drain and exit.',
        epilog=f'It is configured from the environment:\n{settings}',
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument('--demo', action='store_true', help='also serve the scripted demo agent')
    return parser


def main(argv: list[str] | None = None) -> None:
    demo = _parser().parse_args(argv).demo  # answers --help before anything connects
    exit_without_finalizing(lambda: _run_process(demo=demo))


def _run_process(*, demo: bool) -> int:
    try:
        settings = Settings.from_env()
        configure_logging(settings.log_level)
        asyncio.run(run_worker(settings, demo=demo))
    except RecallError as error:
        print(f'temporal-recall-worker: {error}', file=sys.stderr)
        return EXIT_USAGE if isinstance(error, ConfigurationError) else EXIT_FAILURE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    finally:
        logging.shutdown()
    return 0
