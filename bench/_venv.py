"""The reference's virtualenv: created on first use, never committed (it is in .gitignore).

The reference pins pydantic-ai-slim 2.62 while we run 2.68, so it cannot share our environment.
`temporalio` is installed alongside for parity with the reference's durable-execution extras;
the Temporal dev server binary is not needed here (ours, `.venv/bin/temporal`, would be reused).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REFERENCE_VENV = HERE / '.reference-venv'
REFERENCE_PACKAGES = ('pydantic-ai-harness==0.62.0', 'temporalio')
VERSIONED = ('pydantic-ai-harness', 'pydantic-ai-slim', 'pydantic', 'temporalio', 'temporal-recall')


def reference_python() -> Path:
    return REFERENCE_VENV / 'bin' / 'python'


def reference_ready() -> bool:
    """Whether the reference venv exists with the harness importable (no network, no install)."""
    python = reference_python()
    if not python.exists():
        return False
    probe = [str(python), '-c', 'import pydantic_ai_harness.step_persistence']
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


def ensure_reference() -> Path:
    """Create the venv and install the pinned reference if it is not there yet."""
    if not reference_ready():
        print(f'creating {REFERENCE_VENV} (first use) ...', file=sys.stderr)
        subprocess.run(['python3', '-m', 'venv', str(REFERENCE_VENV)], check=True)
        pip = [str(reference_python()), '-m', 'pip', 'install', '--quiet', *REFERENCE_PACKAGES]
        subprocess.run(pip, check=True)
    return reference_python()


def versions(python: Path | str) -> dict[str, str]:
    """Installed versions of the packages that matter, as the given interpreter sees them."""
    code = (
        'import importlib.metadata as m, json, sys\n'
        'out = {"python": sys.version.split()[0]}\n'
        f'for name in {VERSIONED!r}:\n'
        '    try: out[name] = m.version(name)\n'
        '    except m.PackageNotFoundError: pass\n'
        'print(json.dumps(out))'
    )
    import json

    result = subprocess.run([str(python), '-c', code], capture_output=True, text=True, check=True)
    return json.loads(result.stdout)
