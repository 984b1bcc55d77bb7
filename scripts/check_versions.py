"""Run the Temporal, capability, store, chat-UI and replay tests on other pydantic-ai and temporalio releases.

    .venv/bin/python scripts/check_versions.py lowest   # the lower bounds pyproject admits (CI runs this)
    .venv/bin/python scripts/check_versions.py newest   # the canary: today's newest releases, against the lock

`lowest` installs the locked set with pydantic-ai-slim and temporalio moved to the lowest releases
pyproject admits, so the declared range is a tested range. `newest` resolves everything afresh, as a
user's `pip install temporal-recall` does today, prints each package whose version differs from
uv.lock, runs the same tests there and on the lock, and prints every test whose outcome differs:
drift is seen here before users meet it. Each scratch environment is `.venv-lowest` or `.venv-newest`
in the clone, made anew per run. Extra arguments go to pytest. Exit status: pytest's on the scratch
environment (with `newest`, 1 also when an outcome differs from the lock's).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import xml.etree.ElementTree as ElementTree
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UV = ROOT / '.venv' / 'bin' / 'uv'
SUBSET = ['tests/workflows', 'tests/capability', 'tests/store', 'tests/ui', 'tests/replay']
"""What runs on another release: everything that touches pydantic-ai's or Temporal's behaviour."""
WATCHED = ('pydantic-ai-slim', 'temporalio')
EXTRAS = ['--all-extras', '--group', 'dev']


def _uv(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, 'UV_PYTHON_DOWNLOADS': 'never', 'UV_NATIVE_TLS': '1'}
    if 'UV_CACHE_DIR' not in env:
        env['UV_NO_CACHE'] = '1'
    return subprocess.run([str(UV), *args], cwd=ROOT, env=env, check=True, text=True, **kwargs)  # type: ignore[arg-type]


def lower_bounds() -> dict[str, str]:
    """The lowest release of each watched package that pyproject's dependencies admit."""
    dependencies = tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']['dependencies']
    bounds: dict[str, str] = {}
    for requirement in dependencies:
        name = re.split(r'[\[<>=!~ ;]', requirement, maxsplit=1)[0]
        found = re.search(r'>=\s*([\w.]+)', requirement)
        if name in WATCHED and found:
            bounds[name] = found.group(1)
    missing = set(WATCHED) - set(bounds)
    if missing:
        raise SystemExit(f'pyproject.toml gives no lower bound (>=) for {", ".join(sorted(missing))}.')
    return bounds


def locked_versions() -> dict[str, set[str]]:
    """Each locked package's versions: more than one where the lock pins one per Python range (numpy)."""
    exported = _uv(
        'export',
        '--locked',
        *EXTRAS,
        '--no-hashes',
        '--no-emit-project',
        '--no-header',
        '--no-annotate',
        capture_output=True,
    ).stdout
    versions: dict[str, set[str]] = {}
    for name, version in re.findall(r'^([A-Za-z0-9_.-]+)==([^\s;]+)', exported, flags=re.MULTILINE):
        versions.setdefault(_normal(name), set()).add(version)
    return versions


def installed_versions(python: Path) -> dict[str, str]:
    listed = _uv('pip', 'list', '--python', str(python), '--format', 'json', capture_output=True).stdout
    return {entry['name']: entry['version'] for entry in json.loads(listed)}


def _normal(name: str) -> str:
    return re.sub(r'[-_.]+', '-', name).lower()


def make_environment(kind: str) -> Path:
    venv = ROOT / f'.venv-{kind}'
    shutil.rmtree(venv, ignore_errors=True)
    _uv('venv', '--quiet', '--python', sys.executable, str(venv))
    python = venv / 'bin' / 'python'

    def install(*args: str) -> None:
        _uv('pip', 'install', '--quiet', '--python', str(python), *args)

    with tempfile.TemporaryDirectory() as tmp:
        if kind == 'lowest':
            requirements = Path(tmp) / 'requirements.txt'
            _uv('export', '--quiet', '--locked', *EXTRAS, '--no-hashes', '--no-emit-project', '-o', str(requirements))
            overrides = Path(tmp) / 'overrides.txt'
            overrides.write_text(''.join(f'{name}=={version}\n' for name, version in lower_bounds().items()))
            install('-r', str(requirements), '--override', str(overrides))
            install('--no-deps', '-e', '.')
        else:
            # No lock and no cache: what a fresh resolution of pyproject's ranges gives today.
            install('--upgrade', '-e', '.[postgres,dev-server,api,semantic,bench]', '--group', 'dev')
    return python


def run_tests(python: Path, report: Path, pytest_args: list[str]) -> int:
    command = [
        str(python),
        '-m',
        'pytest',
        '-q',
        '-p',
        'no:cacheprovider',
        '-n',
        os.environ.get('TEST_WORKERS', str(os.cpu_count() or 1)),  # One per CPU, as scripts/test.
        '--dist',
        'worksteal',
        f'--junitxml={report}',
        *(pytest_args or SUBSET),
    ]
    return subprocess.run(command, cwd=ROOT).returncode


def outcomes(report: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for case in ElementTree.parse(report).iter('testcase'):
        name = f'{case.get("classname")}::{case.get("name")}'
        kinds = {child.tag for child in case}
        found[name] = 'failed' if kinds & {'failure', 'error'} else 'skipped' if 'skipped' in kinds else 'passed'
    return found


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ('lowest', 'newest'):
        print(__doc__)
        return 2
    kind, pytest_args = argv[0], argv[1:]
    python = make_environment(kind)
    locked = locked_versions()
    installed = {_normal(name): version for name, version in installed_versions(python).items()}
    print(f'check_versions {kind}: ' + ', '.join(f'{name} {installed.get(name, "missing")}' for name in WATCHED))
    differ = sorted(name for name in installed.keys() & locked.keys() if installed[name] not in locked[name])
    for name in differ:
        print(f'  {name}: {" or ".join(sorted(locked[name]))} locked, {installed[name]} here')
    print(f'  {len(differ)} of {len(locked)} locked packages differ')
    with tempfile.TemporaryDirectory() as tmp:
        here = Path(tmp) / f'{kind}.xml'
        status = run_tests(python, here, pytest_args)
        if kind == 'newest':
            base = Path(tmp) / 'locked.xml'
            run_tests(ROOT / '.venv' / 'bin' / 'python', base, pytest_args)
            theirs, ours = outcomes(here), outcomes(base)
            changed = sorted(name for name in theirs.keys() | ours.keys() if theirs.get(name) != ours.get(name))
            for name in changed:
                print(f'  {name}: {ours.get(name, "absent")} on the lock, {theirs.get(name, "absent")} on the newest')
            print(f'check_versions newest: {len(changed)} of {len(ours)} test outcomes differ from the locked run')
            status = status or (1 if changed else 0)
    return status


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
