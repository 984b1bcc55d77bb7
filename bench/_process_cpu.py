"""The CPU a fleet's processes spend, by role, read from /proc: where a batch's CPU went (issue 42).

`bench_fleet.py` samples it around each batch. A workflow's CPU is spent in three places: the
Temporal dev server (the `temporal` process), the worker processes, and, on PostgreSQL, the
database's processes (every `postgres` process of this machine: run the benchmark beside nothing
else that uses the server). On a shared machine these per-process figures compare the two variants
better than their rates do, since another job's load slows both without adding to either.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from pathlib import Path

__all__ = ('ROLES', 'cpu_by_process', 'process_cpu', 'spent_per_role')

ROLES = ('Temporal server', 'workers', 'PostgreSQL')

_TICKS = os.sysconf('SC_CLK_TCK')

ProcessKey = tuple[str, int]
"""`(role, pid)`."""


def _stat(pid: int) -> tuple[str, float] | None:
    """The command name and the CPU seconds (user + system) of `pid`; `None` once it is gone."""
    try:
        stat = Path(f'/proc/{pid}/stat').read_text()
    except OSError:
        return None
    name, rest = stat[stat.index('(') + 1 : stat.rindex(')')], stat.rsplit(')', 1)[1].split()
    return name, (int(rest[11]) + int(rest[12])) / _TICKS  # utime, stime


def process_cpu(pid: int) -> float | None:
    """The CPU seconds (user + system) `pid` has spent; `None` once it is gone."""
    stat = _stat(pid)
    return None if stat is None else stat[1]


def cpu_by_process(workers: Collection[int]) -> dict[ProcessKey, float]:
    """CPU seconds so far of each process of the fleet: the `workers` (by pid), the Temporal server and
    PostgreSQL's processes (by command name)."""
    found: dict[ProcessKey, float] = {}
    for entry in Path('/proc').iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        stat = _stat(pid)
        if stat is None:
            continue
        name, seconds = stat
        if pid in workers:
            found['workers', pid] = seconds
        elif name.startswith('temporal'):
            found['Temporal server', pid] = seconds
        elif name.startswith('postgres'):
            found['PostgreSQL', pid] = seconds
    return found


def spent_per_role(before: Mapping[ProcessKey, float], after: Mapping[ProcessKey, float]) -> dict[str, float]:
    """CPU seconds each role spent between two samples (a process that started in between counts from
    zero; one that ended in between took its last seconds with it)."""
    spent = dict.fromkeys(ROLES, 0.0)
    for key, seconds in after.items():
        spent[key[0]] += seconds - before.get(key, 0.0)
    return spent
