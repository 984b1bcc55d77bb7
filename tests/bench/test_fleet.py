"""`scripts/bench_fleet.py`: its arguments, its store check (which must catch a bad conversation), tiny runs."""

from __future__ import annotations

import glob
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from bench.fleet_agent import FLOOR, WITH, NothingStored, build, expected_kinds, prompt_for

from temporal_recall import ConversationRecall, RecallDeps, RunPromptOutput, open_store

from ._scripts import SCRIPTS, load_script

fleet = load_script('bench_fleet')


def test_defaults_are_the_issues_measurement() -> None:
    args = fleet.parse_args([])
    assert (args.backends, args.workers, args.sqlite_workers, args.workflows, args.rounds, args.faults) == (
        ['postgresql', 'sqlite'],
        3,
        1,
        48,
        2,
        False,
    )


@pytest.mark.parametrize(
    ('argv', 'message'),
    [
        (['--backends', 'postgresql,oracle'], '--backends: unknown oracle'),
        (['--workers', '0'], '--workers must be at least 1'),
        (['--sqlite-workers', '0'], '--sqlite-workers must be at least 1'),
        (['--rounds', '0'], '--rounds must be at least 1'),
        (['--workflows', '0'], '--workflows must be at least 1'),
        (['--faults', '--workflows', '3'], '(4 with --faults'),
    ],
)
def test_bad_arguments_are_refused_with_the_reason(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        fleet.parse_args(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


async def test_the_store_check_passes_a_clean_run_and_names_a_branched_conversation(tmp_path: Path) -> None:
    url = str(tmp_path / 'fleet.db')
    outputs: dict[str, RunPromptOutput] = {}
    async with await open_store(url) as store:
        agent = build(WITH, recall=ConversationRecall(store=store), latency=0, durable=False)
        for conversation_id in ('clean', 'branched'):
            result = await agent.run(prompt_for(conversation_id), conversation_id=conversation_id, deps=RecallDeps())
            outputs[conversation_id] = RunPromptOutput(output='', conversation_id=conversation_id, run_id=result.run_id)
        assert await fleet.check_conversations(url, dict(outputs)) == []
        # Another run sent to the conversation without its history: the first run is left as a branch.
        await agent.run(prompt_for('another'), conversation_id='branched', deps=RecallDeps())
    problems = await fleet.check_conversations(url, outputs)
    assert problems and not any(problem.startswith('clean') for problem in problems), problems
    assert any(problem.startswith('branched: its prompt is not its own') for problem in problems), problems
    assert any(problem.startswith('branched: messages of runs') for problem in problems), problems
    assert any(problem.startswith('branched: branches') for problem in problems), problems
    assert 'the store holds 24 entries, not 2 x 8' in problems, problems


async def test_the_nothing_stored_floor_takes_the_same_writes_as_a_real_store(tmp_path: Path) -> None:
    """The floor is only a floor if the capability does over `NothingStored` what it does over a store:
    the same appends, of the same messages, at the same places."""
    seen: list[list[tuple[str, int, int]]] = []
    nothing = NothingStored()
    async with await open_store(str(tmp_path / 'real.db')) as store:
        for recall_store in (store, nothing):
            calls: list[tuple[str, int, int]] = []
            original = recall_store.append

            async def append(request: Any, original: Any = original, calls: list[Any] = calls) -> Any:
                calls.append((request.conversation_id, request.base_length, len(request.messages)))
                return await original(request)

            recall_store.append = append  # type: ignore[method-assign]
            agent = build(FLOOR, recall=ConversationRecall(store=recall_store), latency=0, durable=False)
            for conversation_id in ('first', 'second'):
                await agent.run(prompt_for(conversation_id), conversation_id=conversation_id, deps=RecallDeps())
            seen.append(calls)
        stored = await store.load('first')
    real, floor = seen
    assert floor == real and len(real) == 8, (real, floor)  # one write per model request, 4 per run
    assert nothing.appends == 8
    assert stored is not None and len(stored.messages) == len(expected_kinds())


def test_the_expected_run_is_a_prompt_three_tool_calls_and_an_answer() -> None:
    assert expected_kinds() == ['user-prompt'] + ['tool-call', 'tool-return'] * 3 + ['text']


def run_script(*argv: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPTS / 'bench_fleet.py'), *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.slow
@pytest.mark.temporal
def test_a_tiny_sqlite_run_prints_every_variant_and_the_ratios() -> None:
    done = run_script('--backends', 'sqlite', '--workflows', '2', '--rounds', '1', timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    line = r'\d+\.\d\d workflows/s, model request p50 +\d+ ms p99 +\d+ ms'
    assert re.search(rf'^  round 1  without: +{line} \| with: +{line}$', done.stdout, re.M), done.stdout
    assert re.search(rf'^ +nothing stored: +{line} \| CPU ms per workflow, Temporal server \d+', done.stdout, re.M), (
        done.stdout
    )
    assert re.search(r'^  mean   without .* with/without \d+\.\d\dx', done.stdout, re.M), done.stdout
    assert re.search(
        r'^  floor  nothing stored \d+\.\d\d workflows/s: \d+\.\d\dx without, .* with/nothing stored \d+\.\d\dx$',
        done.stdout,
        re.M,
    ), done.stdout


@pytest.mark.slow
@pytest.mark.temporal
@pytest.mark.skipif(
    not (glob.glob('/usr/lib/postgresql/*/bin/initdb') or shutil.which('initdb')),
    reason='needs PostgreSQL server binaries (initdb, pg_ctl) for a cluster of its own',
)
def test_a_small_fault_run_passes() -> None:
    # Enough workflows that each fault (at a quarter and at half of them finished) finds some in flight.
    done = run_script('--faults', '--workers', '2', '--workflows', '24', timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert 'PostgreSQL crash-restarted' in done.stdout and 'SIGKILLed and a replacement started' in done.stdout
    # The recovery is printed, never asserted as a time: the workflows in flight at the kill, and each retry's wait.
    recovered = r'^  recovery: the \d+ workflows in flight at the kill completed within \d+\.\d s of it$'
    assert re.search(recovered, done.stdout, re.M), done.stdout
    assert re.search(
        r'^  kill-to-retry wait: (\d+ activities of the killed worker started again elsewhere|no activity was running)',
        done.stdout,
        re.M,
    ), done.stdout
    # When the workflows the restart held back all finish in one burst, a second wave gives the kill work in
    # flight: every workflow started, both waves, must complete.
    second_wave = re.search(
        r'^  the rest finished in one burst after the restart: (\d+) more workflows started$', done.stdout, re.M
    )
    started = 24 + (int(second_wave.group(1)) if second_wave else 0)
    assert re.search(rf'^PASS: {started} workflows completed', done.stdout, re.M), done.stdout
