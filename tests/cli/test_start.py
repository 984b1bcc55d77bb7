"""What `recall` imports: `--help` and `--version` none of the heavy libraries, a command only what it uses.

Checked on the modules a real process ends with (the tests' own process has imported everything), never on
a time: what is imported is what costs, and it does not vary with the machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from ._support import Filled, clean_env

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

NOT_FOR_A_SQLITE_SEARCH = (
    'temporalio',
    'asyncpg',
    'yaml',
    'uvicorn',
    'starlette',
    'temporal_recall.activities',
    'temporal_recall.capability',
    'temporal_recall.workflows',
    'temporal_recall.worker',
    'temporal_recall.api',
)
"""What `recall search --format json` on a SQLite store has no use for: Temporal (not even for its metrics or
configuration), the PostgreSQL driver, YAML, the HTTP API, and this package's Temporal side."""

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


def among(names: tuple[str, ...], modules: set[str]) -> list[str]:
    """Which of `names` are among `modules`, themselves or by a submodule."""
    return [n for n in names if any(module == n or module.startswith(f'{n}.') for module in modules)]


def heavy(modules: set[str]) -> list[str]:
    return among(HEAVY, modules)


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


def test_a_search_on_sqlite_imports_neither_temporal_nor_the_postgres_driver(filled: Filled) -> None:
    done, modules = imported_by('search', 'support-42', 'order', '--store', str(filled.path), '--format', 'json')
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)['hits']
    assert {'aiosqlite', 'temporal_recall.store.sqlite._store', 'temporal_recall.search.plan'} <= modules
    unused = among(NOT_FOR_A_SQLITE_SEARCH, modules)
    assert not unused, f'recall search imported {unused}'


def test_the_check_sees_a_heavy_module_and_its_submodules() -> None:
    light = {'cyclopts', 'rich.console', 'temporal_recall.cli', 'temporal_recall._search_terms', 'pydantic_settings'}
    found = {'pydantic', 'pydantic_ai.messages', 'temporal_recall.store.sqlite._store'}
    assert heavy(light | found) == ['pydantic', 'pydantic_ai', 'temporal_recall.store']
