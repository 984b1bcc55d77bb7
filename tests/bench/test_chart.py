"""`bench/_chart.py`: the recorded search p50s and the chart `bench_search.py --messages N` draws from them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import _chart

SCOPE = {
    'ours, SQLite': {'rare': [0.001, 0.002], 'common': [0.010, 0.030]},
    'FTS5 OR': {'rare': [0.001], 'common': [0.050, 0.070]},
    'FTS5 AND': {'rare': [0.0001], 'common': [0.020]},
    'tantivy OR': {'rare': [], 'common': []},
}


def points(messages: int, commit: str) -> list[_chart.Point]:
    return _chart.points_of(SCOPE, messages, date='2026-12-03', commit=commit, command='bench_search.py')


def test_a_point_is_the_p50_over_every_query_class_of_each_charted_search() -> None:
    found = {point.series: point.p50_ms for point in points(10_000, 'abc1234')}
    # ours: median of 1, 2, 10, 30 ms; FTS5 OR: of 1, 50, 70 ms. FTS5 AND is not charted, nor a search without samples.
    assert found == {'ours, SQLite': pytest.approx(6.0), 'FTS5 OR': pytest.approx(50.0)}


def test_a_new_run_replaces_the_point_of_its_search_and_size_and_keeps_the_others(tmp_path: Path) -> None:
    path = tmp_path / 'points.json'
    _chart.record(points(10_000, 'old1111'), path)
    _chart.record(points(100_000, 'old1111'), path)
    kept = _chart.record(points(10_000, 'new2222'), path)
    assert [(p.series, p.messages, p.commit) for p in kept] == [
        ('ours, SQLite', 10_000, 'new2222'),
        ('ours, SQLite', 100_000, 'old1111'),
        ('FTS5 OR', 10_000, 'new2222'),
        ('FTS5 OR', 100_000, 'old1111'),
    ]
    assert json.loads(path.read_text())[0]['command'] == 'bench_search.py'
    assert _chart.load(path) == kept


def test_the_chart_is_an_svg_naming_each_search_and_the_runs(tmp_path: Path) -> None:
    pytest.importorskip('matplotlib', reason="the chart needs the bench extra: pip install -e '.[bench]'")
    chart = tmp_path / 'chart.svg'
    assert _chart.draw(points(10_000, 'abc1234') + points(100_000, 'abc1234'), chart) is None
    text = chart.read_text()
    assert text.startswith('<?xml') and '<svg' in text
    assert 'ours, SQLite' in text and 'SQLite FTS5 (OR query)' in text and 'tantivy' not in text
    assert '2026-12-03 on abc1234' in text
