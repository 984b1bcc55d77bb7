"""Every fenced Python block of README.md and docs/ runs, as a reader would run it (issue 53).

Each example (a block, or a page's group of blocks, see `_blocks`) is written to a file of its own and
run in a process of its own, in an empty folder: a script as `python example.py` runs it, a block that
awaits at the top level as `python -m asyncio` would, a test file under pytest. An example that only
illustrates is marked so in its fence, with a reason, and is reported as skipped with it.

Addresses in the examples stand for the test suite's servers, and are the only thing changed in what
runs: the Temporal server at `localhost:7233` is the session's dev server, the PostgreSQL store at
`postgresql://recall@db/recall` is a schema of the test server's own, dropped afterwards, and the
metrics endpoint at `127.0.0.1:9464` is a free port.
An example that needs PostgreSQL skips where the suite has none, as every PostgreSQL test does.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from ..store._support import PostgresSite, postgres_url
from ._blocks import KNOWN, Example, examples, pytest_config, python_blocks

SERVER_ADDRESS = 'localhost:7233'
POSTGRES_URL = 'postgresql://recall@db/recall'
METRICS_ADDRESS = '127.0.0.1:9464'
RUN_SECONDS = 300
"""A guard against a hung example, not a bound on how long one takes."""

# Runs an example file: a script as `python example.py` runs it, a file that awaits at the top level as an
# interactive `python -m asyncio` would. Once the example has returned, the process ends with `os._exit`, as
# `recall` does: the Temporal SDK's runtime threads can crash an interpreter's shutdown after a client was
# used (`Fatal Python error: PyGILState_Release`, see the testing guide), which says nothing of the example.
RUNNER = """
import ast, asyncio, inspect, os, runpy, sys, types
path = sys.argv[1]
source = open(path, encoding='utf-8').read()
try:
    compile(source, path, 'exec')
except SyntaxError:
    module = types.ModuleType('__main__')
    module.__file__ = path
    sys.modules['__main__'] = module
    ran = eval(compile(source, path, 'exec', flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT), module.__dict__)
    if inspect.iscoroutine(ran):
        asyncio.run(ran)
else:
    runpy.run_path(path, run_name='__main__')
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
"""

EXAMPLES = examples()


def _marks(example: Example) -> list[pytest.MarkDecorator]:
    marks: list[pytest.MarkDecorator] = []
    if SERVER_ADDRESS in example.source or 'dev_server(' in example.source:
        marks.append(pytest.mark.temporal)
    if POSTGRES_URL in example.source:
        marks.append(pytest.mark.postgres)
    return marks


@pytest_asyncio.fixture
async def postgres_schema_url() -> AsyncIterator[str]:
    site = PostgresSite(postgres_url())
    try:
        yield site.url
    finally:
        await site.close()


def test_every_python_block_is_marked_in_a_way_the_runner_knows() -> None:
    blocks = python_blocks()
    assert len(blocks) >= 15, 'the collector found almost no Python blocks: is the fence syntax still parsed?'
    for block in blocks:
        unknown = set(block.attributes) - KNOWN
        assert not unknown, f'{block.where}: unknown fence attributes {sorted(unknown)}'
        test = block.attributes.get('test')
        assert test in (None, 'skip', 'pytest'), f'{block.where}: test="{test}" is neither skip nor pytest'
        if test == 'skip':
            assert block.attributes.get('reason'), f'{block.where}: an illustrative block must say why (reason="...")'
        if test == 'pytest':
            assert pytest_config(block.page), (
                f'{block.where}: a pytest block needs its page\'s "# pyproject.toml" block'
            )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


def _run(example: Example, source: str, folder: Path) -> subprocess.CompletedProcess[str]:
    test = example.first.attributes.get('test')
    if test == 'pytest':
        (folder / 'test_example.py').write_text(source)
        (folder / 'pyproject.toml').write_text(pytest_config(example.first.page) or '')  # the page's config alone
        command = [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', 'test_example.py']
    else:
        (folder / 'example.py').write_text(source)
        command = [sys.executable, '-c', RUNNER, 'example.py']
    return subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=RUN_SECONDS)


@pytest.mark.parametrize('example', [pytest.param(e, id=e.id, marks=_marks(e)) for e in EXAMPLES])
def test_the_example_runs(example: Example, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if example.skip_reason is not None:
        pytest.skip(f'{example.id} only illustrates: {example.skip_reason}')
    source = example.source
    if SERVER_ADDRESS in source:
        source = source.replace(SERVER_ADDRESS, request.getfixturevalue('temporal_dev_server').address)
    if POSTGRES_URL in source:
        source = source.replace(POSTGRES_URL, request.getfixturevalue('postgres_schema_url'))
    if METRICS_ADDRESS in source:  # a port of its own: other test processes of this machine may run it too
        source = source.replace(METRICS_ADDRESS, f'127.0.0.1:{_free_port()}')
    ran = _run(example, source, tmp_path)
    said = f'{example.id} exited {ran.returncode}\n--- stdout\n{ran.stdout}\n--- stderr\n{ran.stderr}'
    assert ran.returncode == 0, said
    for text in example.prints:
        assert text in ran.stdout, f'{example.id} should print {text!r}\n{said}'
    if example.first.attributes.get('test') == 'pytest':
        assert ' passed' in ran.stdout and 'warning' not in ran.stdout.lower(), said
