"""The agents the shipped workflows can run, registered by the worker before it starts.

Workflow code imports this module through `imports_passed_through()`, so it reads the worker's own
registry. The registry is filled once, before the worker polls, and never changes while workflows
run, so reading it is deterministic.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic_ai.agent.abstract import AbstractAgent

__all__ = ('agent_named', 'register_agents', 'registered_agents')

_AGENTS: dict[str, AbstractAgent[Any, Any]] = {}


def register_agents(agents: Iterable[AbstractAgent[Any, Any]]) -> None:
    for agent in agents:
        if not agent.name:
            raise ValueError('An agent run by temporal-recall workflows needs a `name=`; it is part of activity names.')
        existing = _AGENTS.get(agent.name)
        if existing is not None and existing is not agent:
            raise ValueError(f'Two different agents are named {agent.name!r}; agent names must be unique per worker.')
        _AGENTS[agent.name] = agent


def registered_agents() -> list[AbstractAgent[Any, Any]]:
    return list(_AGENTS.values())


def agent_named(name: str | None) -> AbstractAgent[Any, Any]:
    if not _AGENTS:
        raise LookupError('No agents are registered on this worker; pass `agents=[...]` to `build_worker`.')
    if name is None:
        return next(iter(_AGENTS.values()))
    try:
        return _AGENTS[name]
    except KeyError:
        raise LookupError(
            f'No agent named {name!r} is registered on this worker (registered: {", ".join(sorted(_AGENTS))}).'
        ) from None
