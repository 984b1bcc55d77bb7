"""Turn both sides' measurements into one table: rows, the printed table, the markdown file.

Kept apart from the driver so the arithmetic (which write samples count as "at 100 messages",
how percentiles are taken, what the ratio means) is in one small place a reader can check.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass
from typing import Any

WRITE_POINTS = ((10, 8, 12), (100, 90, 110), (1000, 950, 1000))
"""(label, lowest, highest history length after the write) counted as a write "at" that size."""


@dataclass(frozen=True)
class Row:
    metric: str
    ours: float | None
    reference: float | None
    unit: str
    note: str = ''

    @property
    def ratio(self) -> float | None:
        """Reference divided by ours: how many times more the reference costs."""
        if self.ours is None or self.reference is None or self.ours == 0:
            return None
        return self.reference / self.ours


def percentile(samples: list[float], fraction: float) -> float:
    """Nearest-rank percentile; with few samples p95 is simply the slowest."""
    ordered = sorted(samples)
    rank = max(1, round(fraction * len(ordered) + 0.4999))
    return ordered[min(rank, len(ordered)) - 1]


def write_ms(result: dict[str, Any] | None, low: int, high: int) -> float | None:
    if result is None:
        return None
    samples = [seconds for length, seconds in result['writes'] if low <= length <= high]
    return statistics.median(samples) * 1000 if samples else None


def messages_in(result: dict[str, Any]) -> int:
    """Every write is one step boundary of two messages (see `_workload.py`)."""
    return 2 * len(result['writes'])


def rows(
    phases: list[tuple[str, dict[str, Any], dict[str, Any] | None]], temporal: dict[str, Any] | None = None
) -> list[Row]:
    """Rows from `(dataset name, ours, reference-or-None)` per phase, in a fixed reading order.

    `temporal` is `_temporal.measure`'s result (`{'ours': ..., 'reference': ...}`); its rows come last.
    """
    out: list[Row] = []
    for name, ours, reference in phases:
        if name == 'growth':
            for label, low, high in WRITE_POINTS:
                mine = write_ms(ours, low, high)
                if mine is not None:
                    theirs = write_ms(reference, low, high)
                    out.append(Row(f'write per step boundary at {label:,} msgs', mine, theirs, 'ms'))
    for name, ours, reference in phases:
        messages = messages_in(ours)
        out.append(
            Row(
                f'bytes on disk per message ({name}, {messages:,} msgs)',
                ours['bytes'] / messages,
                reference['bytes'] / messages if reference else None,
                'B',
            )
        )
        if name != 'growth':
            out.append(
                Row(
                    f'fill {name} ({messages:,} msgs, every step boundary)',
                    ours['write_seconds'],
                    reference['write_seconds'] if reference else None,
                    's',
                )
            )
    for _name, ours, reference in phases:
        for label, mine in ours['searches'].items():
            theirs = reference['searches'].get(label) if reference else None
            kind = 'whole store' if label.startswith('store') else 'one conversation'
            size = int(label.split()[-1])
            if size < 100 and kind == 'one conversation' and len(ours['searches']) > 2:
                continue  # the 10-message conversation exists for write timings only
            for tag, fraction in (('p50', 0.5), ('p95', 0.95)):
                note = f'n={len(mine["seconds"])}' + (f'/{len(theirs["seconds"])}' if theirs else '')
                out.append(
                    Row(
                        f'search {tag}, {kind} of {size:,} msgs',
                        percentile(mine['seconds'], fraction) * 1000,
                        percentile(theirs['seconds'], fraction) * 1000 if theirs else None,
                        'ms',
                        note,
                    )
                )
    if temporal is not None:
        out += temporal_rows(temporal['ours'], temporal['reference'])
    return out


TEMPORAL_WORKLOADS = {
    'three_step': '3-step run',
    'tool_loop_45': '45-tool-call run',
    'output_tool': 'run ending in an output tool',
}
"""Workload name (`_sidekit.TEMPORAL_WORKLOADS`) -> how the table calls it."""

TEMPORAL_COSTS = (
    ('activities', 'activities', 'count'),
    ('events', 'history events', 'count'),
    ('activity_input_bytes', 'activity-input bytes', 'B'),
    ('history_bytes', 'history bytes', 'B'),
)
"""(result key, what the row calls it, unit), in reading order."""


def temporal_figures(runs: dict[str, dict[str, int]]) -> list[tuple[str, float, str]]:
    """`(what, value, unit)` for one side's one workload, from `{'none' | 'persisted': cost}`.

    Each configuration's absolute cost, what the persisted run left in its store (a check that
    persistence really wrote), then what persistence adds over the same side's run without it.
    """
    none, persisted = runs['none'], runs['persisted']
    out = [
        (f'{heading}: {name}', float(run[key]), unit)
        for heading, run in (('no persistence', none), ('with persistence', persisted))
        for key, name, unit in TEMPORAL_COSTS
    ]
    out.append(('with persistence: messages in the store', float(persisted['stored_messages']), 'count'))
    out += [
        (f'added by persistence: {name}', float(persisted[key] - none[key]), unit) for key, name, unit in TEMPORAL_COSTS
    ]
    extra = persisted['activity_input_bytes'] - none['activity_input_bytes']
    out.append(('added by persistence: activity-input bytes', 100 * extra / none['activity_input_bytes'], '%'))
    tool = runs.get('recall_tool')
    if tool is not None:
        # Ours only: the model's recall tool on top of persistence (its definition rides every model request).
        out += [
            (f'added by persistence and the recall tool: {name}', float(tool[key] - none[key]), unit)
            for key, name, unit in TEMPORAL_COSTS[:3]
        ]
        extra = tool['activity_input_bytes'] - none['activity_input_bytes']
        out.append(
            (
                'added by persistence and the recall tool: activity-input bytes',
                100 * extra / none['activity_input_bytes'],
                '%',
            )
        )
    return out


def temporal_rows(ours: dict[str, Any], reference: dict[str, Any] | None) -> list[Row]:
    """Rows from each side's `{workload: {'none' | 'persisted': cost}}` (see `_sidekit.history_cost`).

    The "added by persistence" rows are the comparison. The "no persistence" rows show both sides
    start from nearly the same baseline: each runs its own pydantic-ai's Temporal integration (2.68
    for us, 2.62 for the reference) and our runs carry `RecallDeps`, so their bytes differ by a few
    percent while the activity and event counts match.
    """
    out: list[Row] = []
    for workload, label in TEMPORAL_WORKLOADS.items():
        if workload not in ours:
            continue
        theirs = temporal_figures(reference[workload]) if reference and workload in reference else None
        for index, (what, mine, unit) in enumerate(temporal_figures(ours[workload])):
            reference_value = theirs[index][1] if theirs and index < len(theirs) else None
            out.append(Row(f'Temporal {label}, {what}', mine, reference_value, unit))
    return out


def fmt(value: float | None, *, whole: bool = False) -> str:
    if value is None:
        return '—'
    if whole:
        return f'{value:,.0f}'
    if value >= 100:
        return f'{value:,.0f}'
    if value >= 10:
        return f'{value:.1f}'
    return f'{value:.2f}'


def ratio_text(row: Row) -> str:
    return '—' if row.ratio is None else f'{row.ratio:,.1f}×'


def table_lines(table: list[Row]) -> list[str]:
    header = '| metric | unit | temporal-recall | reference (harness 0.62) | reference ÷ ours | queries (ours/ref) |'
    lines = [header, '|---|---|---:|---:|---:|---|']
    for row in table:
        whole = row.unit == 'count'
        cells = [row.metric, row.unit, fmt(row.ours, whole=whole), fmt(row.reference, whole=whole), ratio_text(row)]
        cells.append(row.note)
        lines.append('| ' + ' | '.join(cells) + ' |')
    return lines


def machine() -> dict[str, str]:
    memory = 'unknown'
    try:
        with open('/proc/meminfo') as meminfo:
            for line in meminfo:
                if line.startswith('MemTotal:'):
                    memory = f'{int(line.split()[1]) / 1024 / 1024:.1f} GiB'
    except OSError:
        pass
    return {'cores': str(os.cpu_count()), 'memory': memory, 'platform': os.uname().sysname + ' ' + os.uname().release}


def markdown(
    table: list[Row],
    *,
    when: str,
    command: str,
    ours: dict[str, str],
    reference: dict[str, str] | None,
    notes: list[str],
) -> str:
    host = machine()
    lines = [
        '# Benchmarks: temporal-recall vs pydantic-ai-harness (reference)',
        '',
        f'- Date: {when}',
        f'- Command: `{command}`',
        f'- Machine: {host["cores"]} cores, {host["memory"]} memory, {host["platform"]}',
        '- Ours: ' + ', '.join(f'{k} {v}' for k, v in ours.items()),
        '- Reference: ' + (', '.join(f'{k} {v}' for k, v in reference.items()) if reference else 'not run'),
        '',
        *table_lines(table),
        '',
        '## Notes',
        '',
        *(f'- {note}' for note in notes),
        '',
    ]
    return '\n'.join(lines)
