"""Memory a search frees kept in the process for the next one, on glibc (Linux).

A scope-wide search of a large tenant builds numpy arrays of hundreds of thousands of postings (decoded
tiers, weights, bounds), tens of megabytes in all, and frees them when it ends. glibc serves a thread other
than the main one from an arena of its own (the SQLite store searches in its connection's thread), and it
hands the free top of that arena's heap back to the kernel as soon as it is freed. The next search then
writes to fresh pages, and the kernel maps and zeroes each one at its first touch, a page fault per page,
which cost a four-word search at a million messages more than its ranking did (docs/design/store.md, "Freed
memory kept for the next search").

glibc's own setting for this is `M_TOP_PAD`: the free memory an arena keeps at its top when it trims, and
adds when it grows. Opening a store sets it to `TOP_PAD` once per process. What is kept is memory the
process already touched, so its peak resident size does not grow; an arena whose searches once needed that
much keeps up to `TOP_PAD` more resident between them.

A process that sets the padding itself keeps its own: the environment's `MALLOC_TOP_PAD_` or a
`glibc.malloc.top_pad` tunable in `GLIBC_TUNABLES` leave it alone. Elsewhere than glibc nothing is done.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
import sys
import threading

__all__ = ('TOP_PAD', 'keep_freed_memory')

TOP_PAD = 64 << 20
"""The bytes of free memory each glibc arena keeps for the next allocation instead of returning them."""

_M_TOP_PAD = -2
"""`mallopt`'s parameter number for the top padding (glibc's `malloc.h`)."""

_lock = threading.Lock()
_applied: bool | None = None

_log = logging.getLogger('temporal_recall.store')


def keep_freed_memory() -> bool:
    """Set glibc's `M_TOP_PAD` to `TOP_PAD`, once per process (later calls answer as the first did).
    Returns whether it was set: not where the C library is not glibc, or the padding was chosen in the
    environment (`MALLOC_TOP_PAD_`, `GLIBC_TUNABLES`)."""
    global _applied
    with _lock:
        if _applied is None:
            _applied = _apply()
        return _applied


def _chosen_in_environment() -> bool:
    return 'MALLOC_TOP_PAD_' in os.environ or 'glibc.malloc.top_pad' in os.environ.get('GLIBC_TUNABLES', '')


def _apply() -> bool:
    if not sys.platform.startswith('linux') or platform.libc_ver()[0] != 'glibc' or _chosen_in_environment():
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # The C library this process runs on.
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    if mallopt(_M_TOP_PAD, TOP_PAD) != 1:
        _log.warning('glibc refused M_TOP_PAD=%d: searches may fault fresh pages in each time.', TOP_PAD)
        return False
    return True
