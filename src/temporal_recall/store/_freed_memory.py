"""Memory a search frees kept in the process for the next one, on glibc (Linux).

A scope-wide search of a large tenant builds numpy arrays of hundreds of thousands of postings (decoded
tiers, weights, bounds), tens of megabytes in all, and frees them when it ends. glibc serves a thread other
than the main one from an arena of its own (the SQLite store searches in its connection's thread), and it
hands the free top of that arena's heap back to the kernel as soon as it is freed. The next search then
writes to fresh pages, and the kernel maps and zeroes each one at its first touch, a page fault per page,
which cost a four-word search at a million messages more than its ranking did (docs/design/store.md, "Freed
memory kept for the next search").

glibc's own settings decide it, and opening a store sets two of them once per process:

- `M_TOP_PAD` (`TOP_PAD`): the free memory an arena keeps at its top when it trims, and adds when it grows.
- `M_MMAP_THRESHOLD` (`MMAP_THRESHOLD`): the size from which an allocation is a mapping of its own, given
  back to the kernel when freed. glibc raises it by itself as large blocks are freed, up to this ceiling, but
  setting either value stops that, and the main thread (where PostgreSQL's searches run) would then map and
  fault every array past the default; so it is set to the ceiling the rule would reach.

What is kept is memory the process already touched, so its peak resident size does not grow; an arena
whose searches once needed that much keeps up to `TOP_PAD` more resident between them.

A process that tunes glibc's allocator itself keeps its own choices: with any of `MALLOC_TOP_PAD_`,
`MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_` in the environment, or a `glibc.malloc.` tunable in
`GLIBC_TUNABLES`, nothing is set. Elsewhere than glibc nothing is done either.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
import sys
import threading

__all__ = ('MMAP_THRESHOLD', 'TOP_PAD', 'keep_freed_memory')

TOP_PAD = 64 << 20
"""The bytes of free memory each glibc arena keeps for the next allocation instead of returning them."""

MMAP_THRESHOLD = 32 << 20
"""The size from which an allocation is mapped on its own: glibc's ceiling for the threshold it adjusts."""

_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
"""`mallopt`'s parameter numbers (glibc's `malloc.h`)."""

_CHOSEN = ('MALLOC_TOP_PAD_', 'MALLOC_MMAP_THRESHOLD_', 'MALLOC_TRIM_THRESHOLD_')
"""The environment variables by which a process tunes glibc's allocator itself (besides `GLIBC_TUNABLES`)."""

_lock = threading.Lock()
_applied: bool | None = None

_log = logging.getLogger('temporal_recall.store')


def keep_freed_memory() -> bool:
    """Set glibc's `M_TOP_PAD` and `M_MMAP_THRESHOLD` (module notes), once per process (later calls answer
    as the first did). Returns whether they were set: not where the C library is not glibc, or the process
    tunes the allocator in its environment."""
    global _applied
    with _lock:
        if _applied is None:
            _applied = _apply()
        return _applied


def _chosen_in_environment() -> bool:
    return any(name in os.environ for name in _CHOSEN) or 'glibc.malloc.' in os.environ.get('GLIBC_TUNABLES', '')


def _apply() -> bool:
    if not sys.platform.startswith('linux') or platform.libc_ver()[0] != 'glibc' or _chosen_in_environment():
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # The C library this process runs on.
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    for name, parameter, value in (
        ('M_MMAP_THRESHOLD', _M_MMAP_THRESHOLD, MMAP_THRESHOLD),
        ('M_TOP_PAD', _M_TOP_PAD, TOP_PAD),
    ):
        if mallopt(parameter, value) != 1:
            _log.warning('glibc refused %s=%d: searches may fault their arrays in afresh each time.', name, value)
            return False
    return True
