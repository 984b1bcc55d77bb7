"""`build_worker`: a `Worker` with a `RecallPlugin`, in one call; and `import_agents` for the CLI."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from pydantic_ai.agent.abstract import AbstractAgent
from temporalio.client import Client
from temporalio.worker import Worker

from .._store_provider import StoreProvider
from ..embeddings import EmbedderSource
from ..errors import ConfigurationError
from ._plugin import RecallPlugin

__all__ = ('build_worker', 'import_agents')


def import_agents(paths: Sequence[str]) -> list[AbstractAgent[Any, Any]]:
    """Resolve `module:attribute` paths to agent objects, with an error that names a bad path.

    Modules are looked up in the current directory too, as `python -m` does: the `recall` console
    script's import path does not hold it, so `myapp.agents:agent` run from the project folder was
    not found (uvicorn and celery do the same for their app paths).
    """
    here = os.getcwd()
    if here not in sys.path:
        sys.path.append(here)
    agents: list[AbstractAgent[Any, Any]] = []
    for path in paths:
        module_name, _, attribute = path.partition(':')
        if not module_name or not attribute:
            raise ConfigurationError(f'Agent path {path!r} must look like "package.module:attribute".')
        try:
            agent = getattr(importlib.import_module(module_name), attribute)
        except ModuleNotFoundError as error:
            raise ConfigurationError(
                f'Cannot import agent {path!r}: {error}. Run the worker from the folder that holds the '
                'module, add that folder to PYTHONPATH, or install your package into this environment.'
            ) from error
        except (ImportError, AttributeError) as error:
            raise ConfigurationError(f'Cannot import agent {path!r}: {error}') from error
        if not isinstance(agent, AbstractAgent):
            raise ConfigurationError(f'{path!r} is a {type(agent).__name__}, not a pydantic-ai Agent.')
        agents.append(agent)
    return agents


def build_worker(
    client: Client,
    *,
    task_queue: str,
    agents: Sequence[AbstractAgent[Any, Any]],
    store: str | os.PathLike[str] | StoreProvider | Any,
    workflows: Sequence[type] = (),
    activities: Sequence[Callable[..., Any]] = (),
    include_shipped_workflows: bool = True,
    embedder: EmbedderSource | None = None,
    **worker_options: Any,
) -> Worker:
    """`Worker(client, ..., plugins=[RecallPlugin(store, agents=agents)])`, plus your own workflows and activities.

    `embedder` is the plugin's (`RecallPlugin(embedder=...)`): recall by meaning on this worker.

    For a client that already carries a `RecallPlugin`, build a plain `Worker` instead: its
    plugin applies to every worker built from that client.
    """
    plugin = RecallPlugin(store, agents=agents, include_shipped_workflows=include_shipped_workflows, embedder=embedder)
    return Worker(
        client,
        task_queue=task_queue,
        workflows=list(workflows),
        activities=list(activities),
        plugins=[plugin, *worker_options.pop('plugins', ())],
        **worker_options,
    )
