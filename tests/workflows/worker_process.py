"""A worker in its own process, so tests can SIGKILL it mid-run. Configured by environment:

RECALL_TEST_ADDRESS, RECALL_TEST_QUEUE, RECALL_TEST_STORE (a SQLite path or a postgresql:// URL:
several of these processes may share one PostgreSQL store), and optionally
RECALL_TEST_KILL_AFTER_COMMIT=<marker path>: the first store write that commits messages kills
this process with SIGKILL right after the commit, before the activity can report completion
(once: the marker file records that it happened). RECALL_TEST_KILL_ON narrows which write:
`tool-call-response` (a model response calling a tool, mid-run) or `final-response` (a text answer).
RECALL_TEST_START_AFTER=<path>: start polling only once that file exists, so a test can start the
process (a few seconds of imports) ahead of the moment it needs the worker.
RECALL_TEST_CODEC=1: the worker's client carries `message_codec_plugin(RECALL_TEST_STORE)`, as the
README's codec section sets it up: on SQLite, two stores of this process on one file.
"""

from __future__ import annotations

import asyncio
import os
import signal
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic_ai.messages import ModelResponse

from temporal_recall import message_codec_plugin
from temporal_recall.store import open_store
from temporal_recall.testing import connect, running_worker

from .agents import pg_weather_agent, recall_agent, slow_tool_agent, weather_agent


class KillAfterCommit:
    """Delegates to the real store; dies right after the first committing append."""

    def __init__(self, store: Any, marker: Path, on: str = 'any') -> None:
        self._store = store
        self._marker = marker
        self._on = on

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def append(self, request: Any) -> Any:
        result = await self._store.append(request)
        if result.stored and not self._marker.exists() and self._wanted(request.messages[-1]):
            self._marker.write_text('killed')
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    def _wanted(self, last: Any) -> bool:
        kinds = {type(part).__name__ for part in last.parts} if isinstance(last, ModelResponse) else set()
        if self._on == 'tool-call-response':
            return 'ToolCallPart' in kinds
        if self._on == 'final-response':
            return 'TextPart' in kinds
        return True


async def main() -> None:
    store = await open_store(os.environ['RECALL_TEST_STORE'])
    marker = os.environ.get('RECALL_TEST_KILL_AFTER_COMMIT')
    kill_on = os.environ.get('RECALL_TEST_KILL_ON', 'any')
    served = KillAfterCommit(store, Path(marker), kill_on) if marker else store
    codec = message_codec_plugin(os.environ['RECALL_TEST_STORE']) if os.environ.get('RECALL_TEST_CODEC') else None
    client = await connect(os.environ['RECALL_TEST_ADDRESS'], plugins=[codec] if codec else [])
    start_after = os.environ.get('RECALL_TEST_START_AFTER')
    while start_after and not Path(start_after).exists():  # noqa: ASYNC110 - another process creates it
        await asyncio.sleep(0.05)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    agents = [weather_agent, recall_agent, slow_tool_agent, pg_weather_agent]
    # A killed worker's sticky queue holds the workflow's next task until this timeout (10 s by
    # default) sends it to the shared queue: keep the survivor's takeover to about a second.
    sticky = timedelta(seconds=1)
    queue = os.environ['RECALL_TEST_QUEUE']
    async with running_worker(
        client, agents=agents, store=served, task_queue=queue, sticky_queue_schedule_to_start_timeout=sticky
    ):
        await stop.wait()
    await store.close()
    if codec is not None:
        await codec.codec.aclose()


if __name__ == '__main__':
    asyncio.run(main())
