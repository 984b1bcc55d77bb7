"""The README's testing example runs as a user would run it: its own file, its own pytest process."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.temporal, pytest.mark.slow]

README = Path(__file__).resolve().parents[1] / 'README.md'


def _example() -> str:
    text = README.read_text()
    found = re.search(r'<!-- readme-example:start -->\n```python\n(.*?)```\n<!-- readme-example:end -->', text, re.S)
    assert found, 'README lost its testing example markers'
    return found.group(1)


def _config() -> str:
    found = re.search(
        r'<!-- readme-pytest-config:start -->\n```toml\n(.*?)```\n<!-- readme-pytest-config:end -->',
        README.read_text(),
        re.S,
    )
    assert found, 'README lost its pytest configuration markers'
    return found.group(1)


def test_readme_testing_example_passes_as_a_standalone_test_file(tmp_path: Path):
    (tmp_path / 'test_escalation.py').write_text(_example())
    (tmp_path / 'pyproject.toml').write_text(_config())  # the README's configuration, nothing else
    result = subprocess.run(
        [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', 'test_escalation.py'],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert '1 passed' in result.stdout
    assert 'warning' not in result.stdout.lower(), result.stdout  # no asyncio_default_fixture_loop_scope warning
