"""`scripts/measure_step_cost.py`: its arguments, and a tiny run on each backend that prints every part."""

from __future__ import annotations

import re

import pytest

from ..store._support import postgres_url
from ._scripts import load_script

step_cost = load_script('measure_step_cost')


def test_defaults_are_the_issues_measurement() -> None:
    args = step_cost.parse_args([])
    assert (args.backends, args.runs, args.rounds) == (['sqlite', 'postgresql'], 200, 3)


@pytest.mark.parametrize(
    ('argv', 'message'),
    [
        (['--backends', 'sqlite,mysql'], '--backends: unknown mysql'),
        (['--backends', ','], '--backends: unknown (none)'),
        (['--runs', '0'], '--runs must be at least 1'),
        (['--rounds', '0'], '--rounds must be at least 1'),
    ],
)
def test_bad_arguments_are_refused_with_the_reason(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        step_cost.parse_args(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


async def tiny_run(backend: str, extra: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    argv = ['--backends', backend, '--runs', '2', '--rounds', '2', '--warmup', '1', '--profile-runs', '2', *extra]
    await step_cost.main(argv)
    return capsys.readouterr().out


async def test_a_tiny_sqlite_run_measures_both_variants_and_profiles_the_write(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = await tiny_run('sqlite', [], capsys)
    assert re.search(r'^sqlite +round 1: without .* ms \| with .* ms \| with/without \d+\.\d\dx \| append ', out, re.M)
    floor = r'^ +nothing stored +\d+\.\d \( *\d+\.\d\) ms \| nothing stored/without \d+\.\d\dx$'
    assert re.search(floor, out, re.M), out
    assert re.search(r'^sqlite +round 2: ', out, re.M)
    assert re.search(r'^  sqlite +without .* append \d+\.\d ms per run, -?\d+% of the', out, re.M), out
    assert re.search(
        r'^  sqlite +nothing stored +\d+\.\d ms \| nothing stored/without \d+\.\d\dx, '
        r'.* with/nothing stored \d+\.\d\dx$',
        out,
        re.M,
    ), out
    profile = out.split('where the write goes, sqlite', 1)[1]
    # The write transaction runs on SQLite's connection thread: the profile must reach it there.
    assert '_write_transaction' in profile and '_append.py' in profile, profile


@pytest.mark.postgres
async def test_a_tiny_postgres_run_adds_the_servers_cpu(capsys: pytest.CaptureFixture[str]) -> None:
    out = await tiny_run('postgresql', ['--postgres', postgres_url()], capsys)
    assert re.search(r'^postgresql round 1: .* \| server CPU with \d+\.\d ms per run$', out, re.M), out
    assert 'run_write' in out.split('where the write goes, postgresql', 1)[1]
