"""`bench/_process_cpu.py`: the fleet's CPU by role, read from /proc."""

from __future__ import annotations

import os
import subprocess
import sys

from bench._process_cpu import ROLES, cpu_by_process, spent_per_role


def test_a_worker_is_found_by_its_pid_and_its_cpu_counted() -> None:
    busy = subprocess.Popen([sys.executable, '-c', 'sum(range(30_000_000))'])
    try:
        before = cpu_by_process([busy.pid])
        # Exited but not reaped: its /proc entry holds the CPU it used to the end.
        os.waitid(os.P_PID, busy.pid, os.WEXITED | os.WNOWAIT)
        after = cpu_by_process([busy.pid])
    finally:
        busy.kill()
        busy.wait()
    assert ('workers', os.getpid()) not in after
    assert spent_per_role(before, after)['workers'] > 0


def test_spent_per_role_counts_new_processes_from_zero_and_every_role() -> None:
    before = {('workers', 1): 2.0, ('PostgreSQL', 7): 1.0}
    after = {('workers', 1): 2.5, ('workers', 2): 0.25, ('PostgreSQL', 7): 1.5, ('Temporal server', 9): 3.0}
    assert spent_per_role(before, after) == {'Temporal server': 3.0, 'workers': 0.75, 'PostgreSQL': 0.5}
    assert tuple(spent_per_role({}, {})) == ROLES
