"""The agents the shipped workflows can run, registered per task queue by the worker that serves it.

Workflow code imports this module through `imports_passed_through()`, so it reads the worker's own
registry. A worker's agents are registered for its task queue when it starts running (before it
polls) and taken off when it stops, so two workers with different agents can share a process, one after
the other (a test suite) or side by side, and a workflow only ever sees the agents of the worker it
runs on. Nothing changes while a task queue's workflows run, so reading it is deterministic.

A `Replayer` has no task queue: the agents it replays with are registered under `None`, which a
workflow falls back to when its recorded task queue has no worker in this process.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic_ai.agent.abstract import AbstractAgent
from temporalio import workflow

__all__ = ('agent_named', 'check_agents', 'register_agents', 'registered_name', 'unregister_agents')

_AGENTS: dict[str | None, dict[str, AbstractAgent[Any, Any]]] = {}
"""Agents by task queue, then by name, in registration order (the first is the default)."""
_WORKERS: dict[str | None, int] = {}
"""How many registrations hold each task queue's agents (several workers can serve one queue)."""


def check_agents(agents: Iterable[AbstractAgent[Any, Any]]) -> dict[str, AbstractAgent[Any, Any]]:
    """`agents` by name, in order.

    Raises:
        ValueError: An agent has no name, or two different agents have one name.
    """
    named: dict[str, AbstractAgent[Any, Any]] = {}
    for agent in agents:
        if not agent.name:
            raise ValueError('An agent run by temporal-recall workflows needs a `name=`; it is part of activity names.')
        if named.setdefault(agent.name, agent) is not agent:
            raise ValueError(f'Two different agents are named {agent.name!r}; agent names must be unique per worker.')
    return named


def register_agents(agents: Iterable[AbstractAgent[Any, Any]], *, task_queue: str | None) -> None:
    """Make `agents` the ones workflows on `task_queue` run (`None`: those a `Replayer` replays with).

    Raises:
        ValueError: An agent has no name, or two different agents have one name on one task queue.
    """
    named = check_agents(agents)
    if task_queue is None:
        # A replay's agents come first (its first is the default) and replace those of an earlier
        # replay by name; several plugins of one replayer may each register theirs.
        if named:
            _AGENTS[None] = {
                **named,
                **{name: agent for name, agent in _AGENTS.get(None, {}).items() if name not in named},
            }
        return
    registry = _AGENTS.get(task_queue)
    if registry is None:
        _AGENTS[task_queue] = named
    else:  # Another running worker of this process serves the queue.
        for name, agent in named.items():
            if registry.setdefault(name, agent) is not agent:
                raise ValueError(
                    f'Two different agents are named {name!r} on task queue {task_queue!r}; workers of one '
                    'task queue must run the same agents.'
                )
    _WORKERS[task_queue] = _WORKERS.get(task_queue, 0) + 1


def unregister_agents(*, task_queue: str) -> None:
    """Forget `task_queue`'s agents once the last worker registered for it has stopped."""
    left = _WORKERS.get(task_queue, 0) - 1
    if left > 0:
        _WORKERS[task_queue] = left
        return
    _WORKERS.pop(task_queue, None)
    _AGENTS.pop(task_queue, None)


def agent_named(name: str | None) -> AbstractAgent[Any, Any]:
    """The agent `name` of the worker running this workflow (its first agent for `None`).

    Raises:
        LookupError: No such agent on this worker.
    """
    task_queue = workflow.info().task_queue if workflow.in_workflow() else None
    registry = _AGENTS.get(task_queue) or _AGENTS.get(None)
    if not registry:
        raise LookupError('No agents are registered on this worker; pass `agents=[...]` to `RecallPlugin`.')
    if name is None:
        return next(iter(registry.values()))
    try:
        return registry[name]
    except KeyError:
        raise LookupError(
            f'No agent named {name!r} is registered on this worker (registered: {", ".join(sorted(registry))}).'
        ) from None


def registered_name(name: str | None) -> str | None:
    """The name of the agent `name` denotes on the worker running this workflow (its first agent for `None`),
    or `name` itself where no such agent is registered: what a search tells its activity it searches for."""
    try:
        return agent_named(name).name
    except LookupError:
        return name
