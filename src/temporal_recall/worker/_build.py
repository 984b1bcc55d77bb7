"""Wiring a Temporal worker: workflows, activities, agents and the store, in one call."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

from pydantic_ai.agent.abstract import AbstractAgent
from pydantic_ai.durable_exec.temporal import AgentPlugin, PydanticAIPlugin
from temporalio.client import Client
from temporalio.worker import Worker

from .._store_provider import StoreProvider
from ..activities import RecallActivities
from ..errors import ConfigurationError
from ..workflows import ConversationWorkflow, RunPromptWorkflow
from ..workflows._agents import register_agents

__all__ = ('SHIPPED_WORKFLOWS', 'build_worker', 'import_agents')

SHIPPED_WORKFLOWS: tuple[type, ...] = (RunPromptWorkflow, ConversationWorkflow)


def import_agents(paths: Sequence[str]) -> list[AbstractAgent[Any, Any]]:
    """Resolve `module:attribute` paths to agent objects, with an error that names a bad path."""
    agents: list[AbstractAgent[Any, Any]] = []
    for path in paths:
        module_name, _, attribute = path.partition(':')
        if not module_name or not attribute:
            raise ConfigurationError(f'Agent path {path!r} must look like "package.module:attribute".')
        try:
            agent = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as error:
            raise ConfigurationError(f'Cannot import agent {path!r}: {error}') from error
        if not isinstance(agent, AbstractAgent):
            raise ConfigurationError(f'{path!r} is a {type(agent).__name__}, not a pydantic-ai Agent.')
        agents.append(agent)
    return agents


def _has_pydantic_ai_plugin(client: Client) -> bool:
    return any(isinstance(plugin, PydanticAIPlugin) for plugin in client.config().get('plugins', ()))


def build_worker(
    client: Client,
    *,
    task_queue: str,
    agents: Sequence[AbstractAgent[Any, Any]],
    store: str | StoreProvider | Any,
    workflows: Sequence[type] = (),
    activities: Sequence[Callable[..., Any]] = (),
    include_shipped_workflows: bool = True,
    **worker_options: Any,
) -> Worker:
    """A worker serving temporal-recall's workflows and activities for `agents`.

    `store` becomes the process's default store, which agents' `ConversationRecall` capabilities
    built without an explicit store use in their activities. The client must have been connected
    with `PydanticAIPlugin` (its data converter carries pydantic-ai messages).
    """
    if not _has_pydantic_ai_plugin(client):
        raise ConfigurationError(
            'The Temporal client has no PydanticAIPlugin; connect it with '
            '`Client.connect(address, plugins=[PydanticAIPlugin()])`.'
        )
    provider = StoreProvider.default()
    if isinstance(store, StoreProvider):
        provider = store
    elif isinstance(store, str):
        provider.configure(store)
    else:
        provider.configure(store=store)
    register_agents(agents)
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[*(SHIPPED_WORKFLOWS if include_shipped_workflows else ()), *workflows],
        activities=[*RecallActivities(provider).all(), *activities],
        plugins=[AgentPlugin(agent) for agent in agents],
        **worker_options,
    )
