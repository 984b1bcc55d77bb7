"""The lock decides what the README's commands install: `.venv` holds exactly uv.lock's versions."""

from __future__ import annotations

import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LOCK = tomllib.loads((ROOT / 'uv.lock').read_text())
LOCKED: dict[str, set[str]] = {}
for _package in LOCK['package']:
    # A package can be locked at several versions, one per Python range (numpy on 3.11 and on 3.12+).
    LOCKED.setdefault(_package['name'], set()).add(_package.get('version', ''))


def _normal(name: str) -> str:
    return re.sub(r'[-_.]+', '-', name).lower()


def test_the_bootstrap_installs_the_uv_the_lock_pins() -> None:
    pinned = re.search(r'^UV_VERSION=(\S+)$', (ROOT / 'scripts' / 'bootstrap').read_text(), flags=re.MULTILINE)
    assert pinned is not None
    assert LOCKED['uv'] == {pinned.group(1)}


@pytest.mark.skipif(Path(sys.prefix).resolve() != ROOT / '.venv', reason='checks the .venv scripts/bootstrap made')
def test_the_venv_holds_the_locked_versions() -> None:
    installed = {_normal(d.metadata['Name']): d.version for d in importlib.metadata.distributions()}
    installed.pop('temporal-recall')
    locked = {_normal(name): versions for name, versions in LOCKED.items()}
    assert {name: version for name, version in installed.items() if version not in locked.get(name, set())} == {}
    for name in ('pydantic-ai-slim', 'temporalio', 'pydantic', 'uv', 'pip'):
        assert installed[name] in locked[name]


def test_pyproject_admits_the_locked_releases_of_pydantic_ai_and_temporalio() -> None:
    dependencies = tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']['dependencies']
    for name in ('pydantic-ai-slim', 'temporalio'):
        requirement = next(r for r in dependencies if r.startswith(name))
        lower = re.search(r'>=\s*([\d.]+)', requirement)
        assert lower is not None, f'{name} needs a lower bound: the lowest-bound run installs it'
        as_tuple = [int(part) for part in lower.group(1).split('.')]
        (version,) = LOCKED[name]
        assert as_tuple <= [int(part) for part in version.split('.')][: len(as_tuple)]
