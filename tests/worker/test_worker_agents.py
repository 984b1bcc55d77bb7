"""Which agents the worker process serves: those of TEMPORAL_RECALL_AGENTS; the demo agent only when
asked for (`--demo`) or on the demo's store; and with none at all it does not start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from temporal_recall._devserver import free_port
from temporal_recall.errors import ConfigurationError
from temporal_recall.settings import DEMO_AGENT, Settings
from temporal_recall.worker._run import worker_agents

BIN = Path(sys.executable).parent
ENTRY_POINTS = {
    'script': [str(BIN / 'temporal-recall-worker')],
    'recall': [str(BIN / 'recall'), 'worker'],
}


@pytest.mark.slow
@pytest.mark.parametrize('entry', ENTRY_POINTS)
def test_a_worker_without_agents_refuses_to_start_with_status_2_naming_the_setting(entry: str, tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith('TEMPORAL_')}
    # Nothing listens there: the refusal comes before anything connects.
    env |= {'TEMPORAL_ADDRESS': f'127.0.0.1:{free_port()}', 'TEMPORAL_RECALL_STORE': str(tmp_path / 'mine.db')}
    ran = subprocess.run(
        ENTRY_POINTS[entry],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
    )  # the timeout is a hang guard, not a bound
    assert ran.returncode == 2, ran.stderr
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1 and 'Traceback' not in ran.stderr, ran.stderr
    assert 'no agents to serve' in lines[0] and 'TEMPORAL_RECALL_AGENTS' in lines[0] and '--demo' in lines[0]
    assert not (tmp_path / 'mine.db').exists(), 'refused before the store was opened'


def test_the_agents_setting_is_served_as_given():
    settings = Settings(agents=('myapp.agents:support', 'myapp.agents:billing'))
    assert worker_agents(settings) == ('myapp.agents:support', 'myapp.agents:billing')


def test_asked_for_the_demo_it_serves_the_demo_agent_too():
    assert worker_agents(Settings(), demo=True) == (DEMO_AGENT,)
    assert worker_agents(Settings(agents=('myapp.agents:support',)), demo=True) == ('myapp.agents:support', DEMO_AGENT)
    assert worker_agents(Settings(agents=(DEMO_AGENT,)), demo=True) == (DEMO_AGENT,)


@pytest.mark.parametrize('store', ['.demo/recall.db', 'sqlite:///.demo/recall.db', 'ABSOLUTE'])
def test_on_the_demos_store_it_serves_the_demo_agent(store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    url = f'sqlite:///{tmp_path / ".demo" / "recall.db"}' if store == 'ABSOLUTE' else store
    assert worker_agents(Settings(store_url=url)) == (DEMO_AGENT,)


@pytest.mark.parametrize(
    'store', ['sqlite:///temporal-recall.db', 'recall.db', '.demo/other.db', 'postgresql://u@h/db']
)
def test_on_any_other_store_no_agents_is_refused(store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match=r'TEMPORAL_RECALL_AGENTS=myapp\.agents:agent'):
        worker_agents(Settings(store_url=store))
