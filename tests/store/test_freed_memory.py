"""Opening a store keeps what a search frees for the next one (`store._freed_memory`): on glibc, arrays freed in
the main thread (PostgreSQL's searches) or another one (SQLite's) are reused by the next allocations instead of
being faulted in afresh, page by page; and a process that tunes glibc's allocator itself keeps its own choices."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

ON_GLIBC = sys.platform.startswith('linux') and platform.libc_ver()[0] == 'glibc'

ROUNDS = 100
SIZES = (768, 192, 40)
"""The arrays' sizes in pages: 3 MiB, 768 KiB and 160 KiB, below the 4 MiB from which numpy asks for huge
pages, so each page faults alone; glibc maps some of these sizes on their own and serves others from a heap."""

_PROBE = f"""
import asyncio, resource, sys, threading
import numpy as np
from temporal_recall.store import _freed_memory, open_store

faults = []

def search_like():
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    for pages in {SIZES}:
        for _ in range({ROUNDS}):
            arrays = [np.ones(pages * 512) for _ in range(4)]  # 4 KiB of float64 a page.
            del arrays
    faults.append(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before)

async def main():
    store = await open_store(sys.argv[2]) if sys.argv[1] == 'open' else None
    search_like()
    thread = threading.Thread(target=search_like)  # As the store's searches run: while it is open.
    thread.start()
    thread.join()
    if store is not None:
        await store.close()

asyncio.run(main())
print(_freed_memory._applied is True, *faults)
"""

FIRST_ROUND = 4 * sum(SIZES)
"""The pages of one round of each size: what a thread faults in at least once."""


def _probe(*args: str, **chosen: str) -> tuple[bool, int, int]:
    """Whether the probe's process set glibc's parameters, and the page faults of the allocations in its main
    thread and in another."""
    env = {name: value for name, value in os.environ.items() if name not in ('MALLOC_TOP_PAD_', 'GLIBC_TUNABLES')}
    done = subprocess.run(
        [sys.executable, '-c', _PROBE, *args],
        capture_output=True,
        text=True,
        env={**env, **chosen},
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    applied, main, other = done.stdout.split()
    return applied == 'True', int(main), int(other)


@pytest.mark.skipif(not ON_GLIBC, reason="the settings are glibc's: elsewhere opening a store changes nothing")
def test_after_a_store_is_opened_every_thread_reuses_the_memory_it_freed(tmp_path: Path):
    applied, main, other = _probe('open', str(tmp_path / 'store.db'))
    assert applied
    # A hundred rounds of four arrays of each size: the first rounds' pages, and few after them.
    for faults in (main, other):
        assert faults < 3 * FIRST_ROUND, f'{faults} page faults: freed memory went back to the kernel'
    # Without a store opened, glibc hands the freed arrays back and most rounds fault them in again.
    applied, main, other = _probe('none')
    assert not applied
    assert main > ROUNDS // 2 * FIRST_ROUND // 2, main


@pytest.mark.skipif(not ON_GLIBC, reason="the settings are glibc's: elsewhere opening a store changes nothing")
@pytest.mark.parametrize(
    'chosen',
    [
        {'MALLOC_TOP_PAD_': '131072'},
        {'MALLOC_MMAP_THRESHOLD_': '131072'},
        {'MALLOC_TRIM_THRESHOLD_': '131072'},
        {'GLIBC_TUNABLES': 'glibc.malloc.top_pad=131072'},
    ],
)
def test_an_allocator_tuned_in_the_environment_is_left_alone(tmp_path: Path, chosen: dict[str, str]):
    applied, _, _ = _probe('open', str(tmp_path / 'store.db'), **chosen)
    assert not applied
