"""`import_agents`: the `module:attribute` paths of `TEMPORAL_RECALL_AGENTS`, and what a bad one says."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from temporal_recall.errors import ConfigurationError
from temporal_recall.worker import import_agents

AGENTS = """
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

agent = Agent(TestModel(), name='from_the_project_folder')
"""


def test_an_agent_of_the_folder_the_worker_runs_in_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A console script's import path does not hold the current folder; `python -m` does."""
    package = tmp_path / 'recall_test_app'
    package.mkdir()
    (package / '__init__.py').write_text('')
    (package / 'agents.py').write_text(AGENTS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, 'path', [entry for entry in sys.path if entry not in ('', str(tmp_path))])
    monkeypatch.delitem(sys.modules, 'recall_test_app', raising=False)
    monkeypatch.delitem(sys.modules, 'recall_test_app.agents', raising=False)
    [agent] = import_agents(['recall_test_app.agents:agent'])
    assert agent.name == 'from_the_project_folder'


def test_a_module_that_is_nowhere_says_where_it_was_looked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, 'path', list(sys.path))
    with pytest.raises(ConfigurationError, match='PYTHONPATH') as refused:
        import_agents(['no_such_app.agents:agent'])
    assert "Cannot import agent 'no_such_app.agents:agent'" in str(refused.value)
    with pytest.raises(ConfigurationError, match='must look like'):
        import_agents(['no_colon'])
