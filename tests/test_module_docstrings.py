"""Module docstrings say what a module is for and why; measurements and history live in docs/.

A figure with a unit (`12 ms`, `1,003 msg/s`, `48%`, `3×`, `64 KiB`) or a commit id in a module docstring goes
stale with the next change, and a limit restated there is a second copy of a constant: name the constant,
and put measurements, dated, in docs/benchmarks/.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import temporal_recall

PACKAGE = Path(temporal_recall.__file__).parent

_UNITS = r'ms|µs|us|ns|s|seconds?|minutes?|msg/s|messages/s|steps/s|%|[KMG]i?B|×|x'
FIGURE = re.compile(rf'(?<![\w.`])\d[\d,.]*\s?(?:{_UNITS})(?![\w/])')
COMMIT = re.compile(r'(?<![\w/])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w/])')


def stale_prone(docstring: str) -> list[str]:
    """The figures and commit ids quoted in `docstring`."""
    return FIGURE.findall(docstring) + COMMIT.findall(docstring)


def test_no_module_docstring_quotes_a_figure_or_a_commit() -> None:
    found = {
        str(path.relative_to(PACKAGE)): hits
        for path in sorted(PACKAGE.rglob('*.py'))
        if (hits := stale_prone(ast.get_docstring(ast.parse(path.read_text(encoding='utf-8'))) or ''))
    }
    assert not found, f'Module docstrings quoting figures or commits (move them to docs/): {found}'


def test_the_check_finds_figures_and_commits() -> None:
    assert stale_prone('A search takes 72.4 ms at p50 and fills 1,003 msg/s, 48% of it in merges (a94f423).') == [
        '72.4 ms',
        '1,003 msg/s',
        '48%',
        'a94f423',
    ]
    assert stale_prone('Bodies over 64 KiB, a 3× cut, 5 s.') == ['64 KiB', '3×', '5 s']
    assert stale_prone('Runs `merge_due` in 2 phases; see issue 42 and docs/benchmarks/history.md.') == []
