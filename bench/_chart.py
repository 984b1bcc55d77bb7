"""Search p50 against store size, for ours, FTS5 and tantivy: recorded points and the chart drawn from them.

Every `scripts/bench_search.py --messages N` run records its scope-wide p50 over all queries per
engine in `docs/search_p50.json` (replacing an earlier point of the same engine and size, with the
run's date, commit and command), then redraws `docs/search_p50.svg` from every recorded point:
one run at one size adds its column, and the chart shows them all. `bench_search.py --chart`
redraws it without measuring. matplotlib is in the `bench` extra, never a product dependency.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ('CHART', 'POINTS', 'SERIES', 'Point', 'draw', 'load', 'points_of', 'record')

DOCS = Path(__file__).resolve().parents[1] / 'docs'
POINTS = DOCS / 'search_p50.json'
CHART = DOCS / 'search_p50.svg'

SERIES = {
    'ours, SQLite': ('ours, SQLite', 'tab:blue', 'o'),
    'ours, PostgreSQL': ('ours, PostgreSQL', 'tab:cyan', 's'),
    'FTS5 OR': ('SQLite FTS5 (OR query)', 'tab:orange', '^'),
    'tantivy OR': ('tantivy (OR query)', 'tab:green', 'D'),
}
"""The searches charted (labels as `bench/_scale.py` names them): legend text, colour, marker."""


@dataclass(frozen=True, kw_only=True)
class Point:
    series: str
    messages: int
    p50_ms: float
    date: str
    commit: str
    command: str


def points_of(
    scope: dict[str, dict[str, list[float]]], messages: int, *, date: str, commit: str, command: str
) -> list[Point]:
    """One point per charted search of a `Measurement.scope`: the p50 over every query class (seconds in, ms out)."""
    return [
        Point(
            series=label,
            messages=messages,
            p50_ms=round(statistics.median([s for samples in classes.values() for s in samples]) * 1000, 3),
            date=date,
            commit=commit,
            command=command,
        )
        for label, classes in scope.items()
        if label in SERIES and any(classes.values())
    ]


def load(path: Path = POINTS) -> list[Point]:
    if not path.exists():
        return []
    return [Point(**item) for item in json.loads(path.read_text())]


def record(new: list[Point], path: Path = POINTS) -> list[Point]:
    """Add `new` to the points in `path`, replacing any of the same search and size; returns them all."""
    replaced = {(point.series, point.messages) for point in new}
    points = [point for point in load(path) if (point.series, point.messages) not in replaced] + new
    points.sort(key=lambda point: (list(SERIES).index(point.series), point.messages))
    path.write_text(json.dumps([asdict(point) for point in points], indent=1) + '\n')
    return points


def draw(points: list[Point], path: Path = CHART) -> str | None:
    """Write the chart; returns why not (matplotlib missing), or `None` once written."""
    try:
        import matplotlib

        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed, so the chart was not drawn: `.venv/bin/pip install -e '.[bench]'`."
    matplotlib.rcParams['svg.fonttype'] = 'none'  # text stays text: a smaller file that diffs
    matplotlib.rcParams['svg.hashsalt'] = 'search-p50'  # the same points give the same file
    figure, axes = plt.subplots(figsize=(7, 4.2))
    for series, (legend, colour, marker) in SERIES.items():
        mine = sorted((p for p in points if p.series == series), key=lambda p: p.messages)
        if not mine:
            continue
        xs, ys = [p.messages for p in mine], [p.p50_ms for p in mine]
        axes.plot(xs, ys, marker=marker, color=colour, label=legend)
        for x, y in zip(xs, ys, strict=True):
            axes.annotate(_ms(y), (x, y), textcoords='offset points', xytext=(6, -3), fontsize=8, color=colour)
    axes.set_xscale('log')
    axes.margins(x=0.15)
    axes.set_yscale('log')
    axes.set_xlabel('messages in the store')
    axes.set_ylabel('scope-wide search p50, ms (all query classes)')
    axes.set_title('Search latency against store size (lower is better)')
    axes.grid(True, which='major', alpha=0.3)
    axes.legend(fontsize=8)
    runs = sorted({(p.date, p.commit) for p in points})
    figure.text(
        0.01,
        0.01,
        'runs: ' + '; '.join(f'{date} on {commit}' for date, commit in runs) + ' (docs/search_p50.json)',
        fontsize=6,
        color='grey',
    )
    figure.tight_layout(rect=(0, 0.03, 1, 1))
    figure.savefig(path, format='svg', metadata={'Date': None})
    plt.close(figure)
    return None


def _ms(value: float) -> str:
    return f'{value:.2f}' if value < 10 else f'{value:.1f}' if value < 100 else f'{value:,.0f}'
