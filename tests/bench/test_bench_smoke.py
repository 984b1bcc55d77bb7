"""The benchmark entry runs end to end at tiny sizes and produces a sane table.

Uses the reference side only if `bench/.reference-venv` already exists: `--smoke` never installs
anything or touches the network, so this test works offline.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench import _venv, run

pytestmark = pytest.mark.slow

ROW = re.compile(
    r'^\| (?P<metric>[^|]+) \| (?P<unit>[^|]+) \| (?P<ours>[^|]+) \| (?P<ref>[^|]+) \| (?P<ratio>[^|]+) \|'
)


def number(cell: str) -> float | None:
    cell = cell.strip()
    return None if cell == '—' else float(cell.replace(',', '').rstrip('×'))


def test_smoke_run_writes_a_sane_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / 'RESULTS.md'

    assert run.main(['--smoke', '--results', str(results)]) == 0

    text = results.read_text()
    assert capsys.readouterr().out.strip() in text  # the printed table is the one written
    assert 'SMOKE RUN' in text
    assert 'Command: `.venv/bin/python -m bench --smoke' in text
    rows = {m['metric'].strip(): m for line in text.splitlines() if (m := ROW.match(line)) and m['unit'] != 'unit'}
    metrics = set(rows)
    assert 'write per step boundary at 10 msgs' in metrics
    assert any(metric.startswith('search p50, whole store') for metric in metrics)
    assert any(metric.startswith('search p95, one conversation') for metric in metrics)
    for metric, row in rows.items():
        ours = number(row['ours'])
        assert ours is not None and ours > 0, metric
        if metric.startswith('bytes on disk'):
            assert 200 < ours < 100_000, metric
        elif row['unit'].strip() == 'ms':
            assert ours < 5_000, metric
        if _venv.reference_ready():
            reference = number(row['ref'])
            assert reference is not None and reference > 0, metric
            assert number(row['ratio']) == pytest.approx(reference / ours, rel=0.1, abs=0.1), metric
