"""What `recall` imports before it does anything: `--help` and `--version` need none of the heavy libraries.

Checked on the modules a real process ends with (the tests' own process has imported everything), never on
a time: what is imported is what costs, and it does not vary with the machine.
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from ._support import clean_env

HEAVY = (
    'pydantic',
    'pydantic_ai',
    'temporalio',
    'numpy',
    'sqlite3',
    'aiosqlite',
    'asyncpg',
    'yaml',
    'markdown_it',
    'pygments',
    'uvicorn',
    'starlette',
    'temporal_recall.store',
    'temporal_recall.query',
    'temporal_recall.search',
    'temporal_recall.models',
    'temporal_recall.embeddings',
)
"""Libraries (and this package's modules that import them) a command imports only when it runs."""

# `main`, as the console script calls it; the modules it imported are printed on stderr as it exits.
LISTED = (
    'import atexit, sys\n'
    "atexit.register(lambda: print(*sorted(sys.modules), sep='\\n', file=sys.stderr))\n"
    'from temporal_recall.cli import main\n'
    'main()\n'
)


def imported_by(*args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    done = subprocess.run(
        [sys.executable, '-c', LISTED, *args],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    return done, set(done.stderr.split())


def heavy(modules: set[str]) -> list[str]:
    """Which of `HEAVY` are among `modules`, themselves or by a submodule."""
    return [h for h in HEAVY if any(name == h or name.startswith(f'{h}.') for name in modules)]


COMMANDS = (('--help',), ('--version',), ('search', '--help'), ('bodies', 'prune', '--help'), ('serve', '--help'))


def test_help_and_version_import_nothing_heavy() -> None:
    with ThreadPoolExecutor(max_workers=2) as pool:
        found = list(pool.map(lambda args: imported_by(*args), COMMANDS))
    for args, (done, modules) in zip(COMMANDS, found, strict=True):
        assert done.returncode == 0, (args, done.stderr)
        assert 'temporal_recall.cli' in modules, (args, done.stderr)  # the listing did print
        assert not heavy(modules), f'recall {" ".join(args)} imported {heavy(modules)}'


def test_version_prints_the_installed_version() -> None:
    from importlib.metadata import version

    done, _ = imported_by('--version')
    assert done.stdout == f'{version("temporal-recall")}\n'


def test_the_check_sees_a_heavy_module_and_its_submodules() -> None:
    light = {'cyclopts', 'rich.console', 'temporal_recall.cli', 'temporal_recall._search_terms', 'pydantic_settings'}
    found = {'pydantic', 'pydantic_ai.messages', 'temporal_recall.store.sqlite._store'}
    assert heavy(light | found) == ['pydantic', 'pydantic_ai', 'temporal_recall.store']
