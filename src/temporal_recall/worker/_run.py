"""The worker process: connect, serve until SIGTERM or SIGINT, then drain and exit."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
import time
from datetime import timedelta
from typing import Any

from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
from temporalio.client import Client

from .._store_provider import StoreProvider
from ..settings import Settings
from ._build import build_worker, import_agents

__all__ = ('JsonLogFormatter', 'configure_logging', 'main', 'run_worker')

log = logging.getLogger('temporal_recall.worker')

GRACEFUL_SHUTDOWN = timedelta(seconds=90)


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


async def run_worker(settings: Settings, *, stop: asyncio.Event | None = None) -> None:
    """Run a worker until `stop` is set (or SIGTERM/SIGINT arrives), then shut down gracefully."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    agents = import_agents(settings.agents)
    runtime = None
    if settings.health_port is not None:
        from .._metrics import sdk_metrics_port, temporal_runtime

        runtime = temporal_runtime(sdk_metrics_port(settings.health_port))
    plugins: list[Any] = [PydanticAIPlugin()]
    codec_plugin = None
    if settings.message_codec:
        from .._codec import message_codec_plugin

        codec_plugin = message_codec_plugin(settings.store_url)
        plugins.append(codec_plugin)
    client = await Client.connect(**settings.temporal, plugins=plugins, runtime=runtime)
    worker = build_worker(
        client,
        task_queue=settings.task_queue,
        agents=agents,
        store=settings.store_url,
        # Longer than the 60 s activity timeout, shorter than the deployments' 120 s grace period:
        # SIGTERM lets running activities finish before the process exits.
        graceful_shutdown_timeout=GRACEFUL_SHUTDOWN,
    )
    health = None
    if settings.health_port is not None:
        from ._health import HealthServer

        health = HealthServer(settings.health_port, worker=worker)
        await health.start()
    log.info(
        'worker started',
        extra={
            'fields': {
                'task_queue': settings.task_queue,
                'temporal': settings.temporal.get('target_host'),
                'agents': [agent.name for agent in agents],
                'store': settings.store_url.split('@')[-1],
            }
        },
    )
    run = asyncio.create_task(worker.run())
    stopped = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({run, stopped}, return_when=asyncio.FIRST_COMPLETED)
    if stopped in done:
        log.info('shutting down: finishing in-flight activities', extra={'fields': {}})
        if health is not None:
            health.mark_stopping()
        await worker.shutdown()
    else:
        stopped.cancel()
    await run
    if health is not None:
        await health.stop()
    await StoreProvider.default().aclose()
    if codec_plugin is not None:
        await codec_plugin.codec.aclose()
    log.info('worker stopped', extra={'fields': {}})


def main() -> None:
    settings = Settings.from_env()
    configure_logging(settings.log_level)
    asyncio.run(run_worker(settings))
