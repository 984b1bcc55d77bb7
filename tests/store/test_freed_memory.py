"""Opening a store keeps what a search frees for the next one (`store._freed_memory`): on glibc, arrays a
thread frees are reused by its next allocations instead of being faulted in afresh, page by page; and a
process that chose glibc's padding itself keeps its own choice."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

ON_GLIBC = sys.platform.startswith('linux') and platform.libc_ver()[0] == 'glibc'

ROUNDS = 100
ARRAY_PAGES = 768
"""Each array is 3 MiB: below the 4 MiB from which numpy asks for huge pages, so every page faults alone."""

_PROBE = f"""
import asyncio, resource, sys, threading
import numpy as np
from temporal_recall.store import _freed_memory, open_store

faults = []

def search_like():
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    for _ in range({ROUNDS}):
        arrays = [np.ones({ARRAY_PAGES} * 512) for _ in range(4)]  # 4 KiB of float64 a page.
        del arrays
    faults.append(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before)

async def main():
    store = await open_store(sys.argv[2]) if sys.argv[1] == 'open' else None
    thread = threading.Thread(target=search_like)  # As the store's searches run: while it is open.
    thread.start()
    thread.join()
    if store is not None:
        await store.close()

asyncio.run(main())
print(_freed_memory._applied is True, faults[0])
"""


def _probe(*args: str, **chosen: str) -> tuple[bool, int]:
    """Whether the probe's process set the padding, and the page faults of its thread's allocations."""
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
    applied, faults = done.stdout.split()
    return applied == 'True', int(faults)


@pytest.mark.skipif(not ON_GLIBC, reason="the padding is glibc's: elsewhere opening a store changes nothing")
def test_after_a_store_is_opened_a_thread_reuses_the_memory_it_freed(tmp_path: Path):
    applied, kept = _probe('open', str(tmp_path / 'store.db'))
    assert applied
    # Four arrays allocated and freed a hundred times: the first round's pages, and few after it.
    assert kept < 10 * 4 * ARRAY_PAGES, f'{kept} page faults: freed memory went back to the kernel'
    # Without a store opened, glibc hands the freed arrays back and most rounds fault them in again.
    applied, returned = _probe('none')
    assert not applied
    assert returned > ROUNDS // 2 * 4 * ARRAY_PAGES, returned


@pytest.mark.skipif(not ON_GLIBC, reason="the padding is glibc's: elsewhere opening a store changes nothing")
def test_a_padding_chosen_in_the_environment_is_kept(tmp_path: Path):
    applied, _ = _probe('open', str(tmp_path / 'store.db'), MALLOC_TOP_PAD_='131072')
    assert not applied
    applied, _ = _probe('open', str(tmp_path / 'other.db'), GLIBC_TUNABLES='glibc.malloc.top_pad=131072')
    assert not applied
