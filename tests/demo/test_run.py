"""`recall demo` writes only into `.demo` where it runs: `./scripts/demo` leaves nothing outside the clone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ..cli._support import clean_env

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


def test_the_demo_writes_nothing_outside_its_folder(tmp_path: Path):
    home, clone = tmp_path / 'home', tmp_path / 'clone'
    home.mkdir()
    clone.mkdir()
    env = {k: v for k, v in clean_env(HOME=str(home)).items() if not k.startswith('XDG_')}

    ran = subprocess.run(
        [sys.executable, '-m', 'temporal_recall.cli', 'demo'],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        check=False,
    )

    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert 'Demo finished' in ran.stdout
    invoice = ran.stdout.split('for "invoice INV-7731":\n', 1)[1].split('\n\n', 1)[0].splitlines()
    assert len(invoice) == 2 and all('invoice INV-7731' in hit for hit in invoice), invoice  # no hit by meaning alone
    assert sorted(path.relative_to(home) for path in home.rglob('*')) == []  # e.g. no ~/.config/temporalio
    assert sorted(path.name for path in clone.iterdir()) == ['.demo']
    demo = [path.name for path in (clone / '.demo').iterdir()]
    assert 'recall.db' in demo and not [name for name in demo if name.startswith('temporal')], demo  # state gone
