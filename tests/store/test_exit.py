"""A process that opens a store, writes and returns without closing it still exits on its own.

Before, aiosqlite's connection thread (a non-daemon thread) kept the interpreter waiting forever
after `asyncio.run` returned, which is what following the README's plain `agent.run` example did.
Each script runs in its own interpreter, as a user's would.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from temporal_recall.store import open_store

HANG_GUARD = 300.0
"""How long a test waits before it takes the process for hung: far beyond any busy machine's start-up
and exit, so it only ever fails on the bug (a process that never exits), never on a slow one."""

# Kept by a module-level agent, as in the README: never garbage-collected before exit.
KEPT_BY_AN_AGENT = """
import asyncio, sys
from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.messages import ModelResponse, TextPart
from temporal_recall import ConversationRecall, open_store

agent = None

async def main():
    global agent
    store = await open_store(sys.argv[1])
    model = FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart('hello back')]))
    agent = Agent(model, capabilities=[ConversationRecall(store=store)])
    await agent.run('hello', conversation_id='support-42')

asyncio.run(main())
print('returned', flush=True)
"""

# Dropped when `main` returns: garbage-collected after its event loop is closed.
DROPPED = """
import asyncio, sys
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import ModelRequest, UserPromptPart
from temporal_recall import open_store

async def main():
    store = await open_store(sys.argv[1])
    hello = ModelRequest(parts=[UserPromptPart('hello')])
    await store.save(Conversation(messages=[hello], conversation_id='support-42'))

asyncio.run(main())
print('returned', flush=True)
"""


@pytest.mark.parametrize('script', [KEPT_BY_AN_AGENT, DROPPED], ids=['kept-by-an-agent', 'dropped'])
async def test_an_unclosed_store_does_not_keep_the_process_alive(
    any_store_url: str, script: str, tmp_path: Path
) -> None:
    path = tmp_path / 'forgets_to_close.py'
    path.write_text(textwrap.dedent(script))
    try:
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, str(path), any_store_url],
            capture_output=True,
            text=True,
            timeout=HANG_GUARD,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f'the process did not exit on its own ({HANG_GUARD:.0f} s after starting)')
    assert done.returncode == 0, done.stderr
    assert done.stdout == 'returned\n'
    assert 'Traceback' not in done.stderr and 'Exception in thread' not in done.stderr, done.stderr
    # What the script wrote is there, and a SQLite store was closed at exit (its WAL folded in).
    store = await open_store(any_store_url)
    try:
        loaded = await store.load('support-42')
        assert loaded is not None and loaded.messages
    finally:
        await store.close()
    if not any_store_url.startswith('postgresql'):
        assert not Path(f'{any_store_url}-wal').exists()


def test_the_process_exits_on_its_own_after_returning(tmp_path: Path) -> None:
    """Watched from the moment `asyncio.run` returned: the old connection thread kept it alive forever.

    How long the exit may take is the code's own bound (`EXIT_CLOSE_SECONDS` per open connection),
    not something a test on a shared machine can time."""
    path = tmp_path / 'forgets_to_close.py'
    path.write_text(textwrap.dedent(KEPT_BY_AN_AGENT))
    process = subprocess.Popen(
        [sys.executable, str(path), str(tmp_path / 'recall.db')],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == 'returned\n'
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=HANG_GUARD)
        assert process.returncode == 0, process.returncode
    finally:
        still_running = process.poll() is None
        if still_running:
            process.kill()
            process.wait()
        process.stdout.close()  # type: ignore[union-attr]
        process.stderr.close()  # type: ignore[union-attr]
    if still_running:
        pytest.fail(f'the process was still running {HANG_GUARD:.0f} s after asyncio.run returned')
