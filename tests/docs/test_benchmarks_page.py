"""The benchmarks page is one a user can read: short, and every figure in it says when it was measured, on
which commit and with which command (issue 40's item 11; the history is docs/benchmarks/history.md)."""

from __future__ import annotations

import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / 'docs' / 'benchmarks' / 'index.md'


def _section() -> list[str]:
    text = PAGE.read_text(encoding='utf-8')
    return text[text.index('# Benchmarks\n') :].strip('\n').splitlines()


def _tables(lines: list[str]) -> list[tuple[int, int]]:
    """`(first, last)` line numbers of each table in `lines`."""
    tables: list[tuple[int, int]] = []
    for number, line in enumerate(lines):
        if line.startswith('|') and (number == 0 or not lines[number - 1].startswith('|')):
            tables.append((number, number))
        elif line.startswith('|'):
            tables[-1] = (tables[-1][0], number)
    return tables


def test_the_benchmark_section_is_under_60_lines() -> None:
    assert len(_section()) < 60


def test_every_table_says_its_date_commit_and_command() -> None:
    lines = _section()
    tables = _tables(lines)
    assert len(tables) >= 4
    previous_end = 0
    for first, last in tables:
        # What introduces a table: the prose since the previous table, and the table itself (a run's row).
        said = '\n'.join(lines[previous_end : last + 1])
        assert re.search(r'20\d\d-\d\d-\d\d', said), f'no date for the table at line {first}'
        assert re.search(r'`[0-9a-f]{7}`', said), f'no commit for the table at line {first}'
        assert re.search(r'`(\.venv/bin/python|python) [^`]*(scripts|bench)', said), f'no command for line {first}'
        previous_end = last + 1
