"""What a printed measurement needs to be quoted: when, on which commit, on what machine, and the PostgreSQL
schema a script fills and drops (so every script makes and cleans its store the same way)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncGenerator
from pathlib import Path

from bench._scale_engines import drop_schema, with_schema

__all__ = ('DEFAULT_POSTGRES_URL', 'commit', 'header', 'postgres_schema')

ROOT = Path(__file__).resolve().parents[1]

DEFAULT_POSTGRES_URL = os.environ.get('TEMPORAL_RECALL_TEST_POSTGRES_URL', 'postgresql://postgres@127.0.0.1:5432/test')
"""The test suite's server (a local one, trust auth) unless the environment names another."""


def commit() -> str:
    """The checked-out commit, short, with `-dirty` when the work tree has changes."""
    try:
        return subprocess.run(
            ['git', 'describe', '--always', '--dirty', '--abbrev=7'],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return 'unknown'


def header() -> str:
    """One line to quote a run by: date (UTC), commit, cores, Python."""
    when = time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())
    return f'{when}, commit {commit()}, {os.cpu_count()} cores, python {sys.version.split()[0]}'


@contextlib.asynccontextmanager
async def postgres_schema(url: str, prefix: str) -> AsyncGenerator[str]:
    """`url` pointing at a fresh schema (`<prefix>_<hex>`), dropped afterwards."""
    schema = f'{prefix}_{uuid.uuid4().hex[:12]}'
    try:
        yield with_schema(url, schema)
    finally:
        await drop_schema(url, schema)
