"""Issue 18's numbers as text: the fill over time, the latencies per class, the issue's table and its thresholds.

The table and the thresholds use the wall clock, as the issue does; the CPU columns (this process's
CPU time: ours on SQLite, FTS5 and tantivy, not a PostgreSQL server) show the cost without the
wait for a core on a busy machine. The references rank with other formulas (FTS5's `bm25()` and
tantivy's BM25 differ from ours in IDF and length normalisation), so only their time compares,
never their answers' order.
"""

from __future__ import annotations

import math

from bench._scale import TENTHS, Measurement, rate_text
from bench._scale_corpus import QUERY_CLASSES

ALL = 'all'
FTS5_OR = 'FTS5 OR'
TANTIVY = 'tantivy OR'
SLACK_MS = 10.0
"""A class's p95 passes at or under this, whatever FTS5's, and every class's p50 must be under it."""


def percentile(samples: list[float], share: float) -> float:
    """Nearest-rank percentile, in milliseconds."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)] * 1000


def summary(samples: list[float]) -> str:
    """`p50 / p95 / p99 / max` in ms."""
    return ' / '.join(_ms(percentile(samples, share)) for share in (0.50, 0.95, 0.99, 1.0))


def _ms(value: float) -> str:
    return f'{value:.2f}' if value < 10 else f'{value:.1f}' if value < 100 else f'{value:.0f}'


def by_class(measured: Measurement, label: str) -> dict[str, list[float]]:
    """Latencies of one search per class, plus `all` of them."""
    classes = measured.scope[label]
    return {
        **{kind: classes[kind] for kind in QUERY_CLASSES},
        ALL: [s for kind in QUERY_CLASSES for s in classes[kind]],
    }


def fill_lines(measured: Measurement) -> list[str]:
    heading = ' '.join(f'{tenth + 1:>7}' for tenth in range(TENTHS))
    lines = [
        f'Fill: msg/s of write time in each tenth of the fill, {measured.messages:,} messages',
        f'{"engine":<18}|{heading} | overall | per CPU s | bytes/msg',
    ]
    for name, fill in measured.fills.items():
        rates = ' '.join(f'{rate_text(fill.rate(tenth)):>7}' for tenth in range(TENTHS))
        per_message = fill.bytes / measured.messages
        cpu = f'{fill.overall_cpu:9,.0f}' if fill.overall_cpu != math.inf else f'{"—":>9}'
        lines.append(f'{name:<18}|{rates} | {fill.overall:7,.0f} | {cpu} | {per_message:,.0f}')
    rss = ' '.join(f'{"—" if value is None else f"{value / 2**20:,.0f}":>7}' for value in measured.rss)
    lines.append(f'{"RSS MB (process)":<18}|{rss} |')
    lines.append(
        f'peak memory: {measured.peak_rss / 2**20:,.0f} MB peak RSS of this process (resource.getrusage ru_maxrss; '
        f'holds {" + ".join(name for name in measured.fills if "PostgreSQL" not in name)} + the generator; '
        'a PostgreSQL server is not counted)'
    )
    return lines


def latency_lines(measured: Measurement) -> list[str]:
    count = len(next(iter(measured.scope.values()))[QUERY_CLASSES[0]]) if measured.scope else 0
    width = 28
    lines = [
        f'Scope-wide search, ms: p50 / p95 / p99 / max, {count} queries per class, interleaved query by query',
        f'{"search":<18}|' + '|'.join(f' {kind:<{width}}' for kind in (*QUERY_CLASSES, ALL)) + '| all, CPU p50 / p95',
    ]
    for label in measured.scope:
        cells = by_class(measured, label)
        cpu = ' / '.join(_ms(percentile(measured.scope_cpu[label], share)) for share in (0.5, 0.95))
        lines.append(
            f'{label:<18}|'
            + '|'.join(f' {summary(cells[kind]):<{width}}' for kind in (*QUERY_CLASSES, ALL))
            + f'| {cpu}'
        )
    lines.append(
        f'One {measured.long_messages:,}-message conversation (`long`), all classes, ms: p50 / p95 / p99 / max'
    )
    lines.extend(f'{label:<18}| {summary(samples)}' for label, samples in measured.conversation.items())
    lines.append(
        f'rare-id queries whose hit sets differ between engines: {measured.rare_id_disagreements} '
        f'of {measured.rare_id_queries} (an id is in at most a few messages, so every engine should return all of them)'
    )
    if measured.search_rss:
        lines.append(
            'Peak RSS while searching, MB above the RSS before (before): each search alone, after the timed queries'
        )
        lines.extend(f'{label:<18}| {search_rss_text(measured, label)}' for label in measured.search_rss)
    if measured.pruned_queries:
        lines.append(
            f'queries whose ranked hits differ between ours pruned and ours reading every posting: '
            f'{measured.pruned_disagreements} of {measured.pruned_queries} (the pruning is exact: 0)'
        )
    return lines


def search_rss_text(measured: Measurement, label: str) -> str:
    """`+peak above before (before)` in MB, or `–` where the peak was not measured."""
    if label not in measured.search_rss:
        return '–'
    before, peak = measured.search_rss[label]
    return f'+{(peak - before) / 2**20:,.0f} ({before / 2**20:,.0f})'


def issue_table(measured: Measurement) -> list[str]:
    """The table shaped like issue 18's: one column per search."""
    labels = list(measured.scope)
    rows: list[tuple[str, list[str]]] = []

    def fill_cell(label: str) -> str:
        fill = measured.fills[measured.fill_engine[label]]
        first, last = fill.first_and_last
        return f'{first:,.0f} → {last:,.0f} ({fill.overall:,.0f})'

    rows.append(('fill rate, msg/s: first → last tenth (overall)', [fill_cell(label) for label in labels]))
    rows.append(
        (
            'bytes on disk per message',
            [f'{measured.fills[measured.fill_engine[label]].bytes / measured.messages:,.0f}' for label in labels],
        )
    )
    rows.append(
        (
            'scope-wide, all queries: p50 / p95 / p99 / max ms',
            [summary(by_class(measured, label)[ALL]) for label in labels],
        )
    )
    for kind in QUERY_CLASSES:
        rows.append(
            (f'{kind}: p50 / p95 / p99 / max ms', [summary(by_class(measured, label)[kind]) for label in labels])
        )
    rows.append(
        (
            f'one {measured.long_messages:,}-message conversation: p50 / p95 ms',
            [
                ' / '.join(_ms(percentile(measured.conversation[label], share)) for share in (0.5, 0.95))
                if label in measured.conversation
                else '–'
                for label in labels
            ],
        )
    )
    rows.append(
        (
            'peak RSS while searching, MB above the RSS before (before)',
            [search_rss_text(measured, label) for label in labels],
        )
    )
    lines = ['| | ' + ' | '.join(labels) + ' |', '|---' * (len(labels) + 1) + '|']
    lines.extend(f'| {name} | ' + ' | '.join(cells) + ' |' for name, cells in rows)
    return lines


def verdicts(measured: Measurement) -> list[str]:
    """Issue 18's "Done when" thresholds, each a PASS or FAIL line (or why it could not be judged)."""
    lines: list[str] = []

    def judge(ok: bool, text: str) -> None:
        lines.append(f'{"PASS" if ok else "FAIL"}  {text}')

    fills = measured.fills
    sqlite, postgres, fts5 = fills.get('ours, SQLite'), fills.get('ours, PostgreSQL'), fills.get('FTS5')
    if fts5 is None:
        lines.append('(no FTS5 row: the thresholds against FTS5 are not judged)')
    if sqlite is not None and fts5 is not None:
        judge(
            sqlite.overall >= fts5.overall / 4,
            f'SQLite fill rate {sqlite.overall:,.0f} msg/s ≥ ¼ of FTS5 {fts5.overall:,.0f} ({fts5.overall / 4:,.0f})',
        )
    if sqlite is not None:
        first, last = sqlite.first_and_last
        judge(last >= 0.8 * first, f'SQLite fill rate falls ≤ 20% first → last tenth: {first:,.0f} → {last:,.0f}')
    if sqlite is not None and postgres is not None:
        judge(
            postgres.overall >= sqlite.overall / 2,
            f'PostgreSQL fill rate {postgres.overall:,.0f} msg/s ≥ ½ of SQLite {sqlite.overall:,.0f}',
        )
    for label, fill, factor in (('SQLite', sqlite, 2), ('PostgreSQL', postgres, 3)):
        if fill is not None and fts5 is not None:
            mine, theirs = fill.bytes / measured.messages, fts5.bytes / measured.messages
            judge(
                mine <= factor * theirs,
                f'{label} bytes/message {mine:,.0f} ≤ {factor}× FTS5 {theirs:,.0f} ({factor * theirs:,.0f})',
            )
    if FTS5_OR in measured.scope:
        reference = by_class(measured, FTS5_OR)
        for label in (label for label in measured.scope if label.startswith('ours')):
            ours = by_class(measured, label)
            p95, ref95 = percentile(ours[ALL], 0.95), percentile(reference[ALL], 0.95)
            judge(p95 <= ref95 / 4, f'{label}: scope-wide p95 {_ms(p95)} ms ≤ ¼ of FTS5 OR p95 {_ms(ref95)} ms')
            for kind in QUERY_CLASSES:
                p50, p95, ref95 = (
                    percentile(ours[kind], 0.5),
                    percentile(ours[kind], 0.95),
                    percentile(reference[kind], 0.95),
                )
                bound = max(ref95, SLACK_MS)
                judge(p95 <= bound, f'{label}: {kind} p95 {_ms(p95)} ms ≤ max(FTS5 OR {_ms(ref95)}, 10) ms')
                judge(p50 <= SLACK_MS, f'{label}: {kind} p50 {_ms(p50)} ms ≤ 10 ms')
    if TANTIVY in measured.scope:
        lines.extend(_against_tantivy(measured))
    for label, samples in measured.conversation.items():
        p50 = percentile(samples, 0.5)
        judge(p50 < 5, f'{label}: one {measured.long_messages:,}-message conversation p50 {_ms(p50)} ms < 5 ms')
    return lines


def _against_tantivy(measured: Measurement) -> list[str]:
    """Issue 51's thresholds, per query class: on SQLite p50 <= max(2x tantivy, 3 ms) and p95 <=
    max(3x tantivy, 6 ms); on PostgreSQL p50 <= max(3x tantivy, 5 ms)."""
    lines: list[str] = []
    reference = by_class(measured, TANTIVY)
    for label, p50_factor, p50_floor, p95_bound in (
        ('ours, SQLite', 2, 3.0, (3, 6.0)),
        ('ours, PostgreSQL', 3, 5.0, None),
    ):
        if label not in measured.scope:
            continue
        ours = by_class(measured, label)
        for kind in QUERY_CLASSES:
            p50, ref50 = percentile(ours[kind], 0.5), percentile(reference[kind], 0.5)
            bound = max(p50_factor * ref50, p50_floor)
            ok = p50 <= bound
            lines.append(
                f'{"PASS" if ok else "FAIL"}  {label}: {kind} p50 {_ms(p50)} ms ≤ max({p50_factor}× tantivy '
                f'{_ms(ref50)}, {p50_floor:g}) = {_ms(bound)} ms'
            )
            if p95_bound is not None:
                p95, ref95 = percentile(ours[kind], 0.95), percentile(reference[kind], 0.95)
                bound = max(p95_bound[0] * ref95, p95_bound[1])
                lines.append(
                    f'{"PASS" if p95 <= bound else "FAIL"}  {label}: {kind} p95 {_ms(p95)} ms ≤ max({p95_bound[0]}× '
                    f'tantivy {_ms(ref95)}, {p95_bound[1]:g}) = {_ms(bound)} ms'
                )
    return lines


def report(measured: Measurement) -> str:
    parts = [
        *measured.skipped,
        *fill_lines(measured),
        '',
        *latency_lines(measured),
        '',
        *issue_table(measured),
        '',
        "Issue 18's thresholds (FTS5 answers its OR query: the best 10 messages holding any term):",
        *verdicts(measured),
    ]
    return '\n'.join(parts)
