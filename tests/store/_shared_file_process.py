"""A second process on a store file another process holds open; `test_shared_file.py` runs it.

    python -m tests.store._shared_file_process PATH put NAME...   write each NAME as a codec body, read them back
    python -m tests.store._shared_file_process PATH get NAME...   print which of the bodies NAME... it sees
    python -m tests.store._shared_file_process PATH write-loop N PHASE  two stores on PATH in this process:
        until killed, append message group N through one and body N through the other, then print N and
        the text of the file PHASE; N + 1, ...

A body's content is its name; its key is the hash the codec would give it. Prints the names it saw, as JSON.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from pathlib import Path

from temporal_recall.store import AppendRequest, open_store

from ._crash_writer import group


def key(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


async def seen(store, names: list[str]) -> list[str]:
    found = await store.get_bodies(None, [key(name) for name in names])
    return sorted(body.decode() for body in found.values())


async def main(path: str, command: str, *args: str) -> None:
    if command == 'write-loop':
        await write_loop(path, int(args[0]), Path(args[1]))
        return
    async with await open_store(path) as store:
        if command == 'put':
            await store.put_bodies(None, {key(name): name.encode() for name in args})
        print(json.dumps(await seen(store, list(args))), flush=True)


async def write_loop(path: str, start: int, phase: Path) -> None:
    """As a worker with `RecallPlugin` and `message_codec_plugin` on one file: messages and bodies, two stores.

    Each line printed is `N PHASE`: the write N committed, and what the test had written to the file
    `phase` when it began, so the test can tell the writes made after another process came and went.
    """
    messages, bodies = await open_store(path), await open_store(path)
    n = start
    while True:
        seen_phase = phase.read_text() if phase.exists() else '0'
        await messages.append(
            AppendRequest(
                conversation_id=f'loop-{n}',
                scope=None,
                idempotency_key=f'loop-{n}',
                base_length=0,
                base_hash=None,
                messages=group(n),
            )
        )
        await bodies.put_bodies(None, {key(f'loop-body-{n}'): f'loop-body-{n}'.encode()})
        print(n, seen_phase, flush=True)
        n += 1


if __name__ == '__main__':
    asyncio.run(main(*sys.argv[1:]))
