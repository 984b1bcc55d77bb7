"""The Temporal rows' plumbing without a server: exit handling of the side scripts, and the row arithmetic."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import _report, _temporal

RESULT = {'workloads': {'three_step': {'none': {'activities': 3}}}}


def side(tmp_path: Path, exit_code: int, stderr: str, *, write: bool = True) -> tuple[list[str], Path]:
    """A stand-in side script: maybe writes its result, prints to stderr, exits with `exit_code`."""
    out = tmp_path / 'result.json'
    code = (
        'import json, os, sys\n'
        + (f'open({str(out)!r}, "w").write({json.dumps(RESULT)!r})\n' if write else '')
        + f'sys.stderr.write({stderr!r}); sys.stderr.flush(); os._exit({exit_code})\n'
    )
    return [sys.executable, '-c', code], out


def test_a_clean_exit_returns_the_workloads(tmp_path: Path) -> None:
    command, out = side(tmp_path, 0, '')
    assert _temporal.run_side('ours', command, out) == RESULT['workloads']


def test_the_exit_abort_after_a_written_result_is_tolerated(tmp_path: Path) -> None:
    abort = 'Fatal Python error: PyGILState_Release: thread state must be current when releasing\n'
    command, out = side(tmp_path, 134, abort)
    assert _temporal.run_side('reference', command, out) == RESULT['workloads']


def test_the_exit_abort_without_a_result_fails(tmp_path: Path) -> None:
    command, out = side(tmp_path, 134, 'Fatal Python error: PyGILState_Release\n', write=False)
    with pytest.raises(subprocess.CalledProcessError):
        _temporal.run_side('reference', command, out)


def test_any_other_failure_fails_even_with_a_result(tmp_path: Path) -> None:
    command, out = side(tmp_path, 1, 'Traceback (most recent call last): ...\n')
    with pytest.raises(subprocess.CalledProcessError):
        _temporal.run_side('ours', command, out)


def cost(activities: int, events: int, input_bytes: int, stored: int = 0) -> dict[str, int]:
    return {
        'workflow_task_retries': 0,
        'activities': activities,
        'events': events,
        'activity_input_bytes': input_bytes,
        'history_bytes': 2 * input_bytes,
        'stored_messages': stored,
    }


def test_temporal_rows_compare_what_persistence_adds() -> None:
    ours = {'three_step': {'none': cost(3, 25, 1000), 'persisted': cost(6, 43, 1500, stored=4)}}
    reference = {'three_step': {'none': cost(3, 25, 1000), 'persisted': cost(17, 109, 4000, stored=4)}}

    rows = {row.metric: row for row in _report.temporal_rows(ours, reference)}

    added = rows['Temporal 3-step run, added by persistence: activities']
    assert (added.ours, added.reference, added.ratio) == (3, 14, pytest.approx(14 / 3))
    extra = [r for r in rows.values() if r.metric.endswith('activity-input bytes') and r.unit == '%']
    assert [(r.ours, r.reference) for r in extra] == [(50, 300)]
    assert rows['Temporal 3-step run, with persistence: messages in the store'].ours == 4
    assert not any('45-tool-call' in metric for metric in rows)


def test_the_recall_tool_rows_are_ours_alone() -> None:
    ours = {
        'three_step': {
            'none': cost(3, 25, 1000),
            'persisted': cost(3, 25, 1010, stored=4),
            'recall_tool': cost(3, 25, 1200, stored=4),
        }
    }
    reference = {'three_step': {'none': cost(3, 25, 1000), 'persisted': cost(17, 109, 4000, stored=4)}}
    rows = _report.temporal_rows(ours, reference)
    persistence = [r for r in rows if r.metric.endswith('added by persistence: activity-input bytes')]
    assert [(r.ours, r.unit) for r in persistence] == [(10, 'B'), (1.0, '%')]
    assert [r.reference for r in persistence] == [3000, 300]
    tool = [r for r in rows if r.metric.endswith('added by persistence and the recall tool: activity-input bytes')]
    assert [(r.ours, r.reference, r.unit) for r in tool] == [(200, None, 'B'), (20.0, None, '%')]


def test_temporal_rows_without_the_reference_leave_its_cells_empty() -> None:
    ours = {'three_step': {'none': cost(3, 25, 1000), 'persisted': cost(6, 43, 1500, stored=4)}}
    rows = _report.temporal_rows(ours, None)
    assert rows and all(row.reference is None and row.ratio is None for row in rows)
