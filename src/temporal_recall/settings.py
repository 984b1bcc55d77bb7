"""The one place temporal-recall reads its environment.

Everything else receives configuration explicitly, so a library user never has behaviour change
under them because of a variable they did not know about. The Temporal address, namespace, TLS and
API key come from Temporal's own environment configuration (`TEMPORAL_ADDRESS`,
`TEMPORAL_NAMESPACE`, `TEMPORAL_PROFILE`, the TOML config file), exactly as the Temporal CLI reads
them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigurationError

__all__ = ('ENVIRONMENT_VARIABLES', 'Settings', 'embedder_from_env', 'store_url_from_env')

ENVIRONMENT_VARIABLES: dict[str, str] = {
    'TEMPORAL_RECALL_STORE': 'Store URL: `sqlite:///path/to/recall.db` or `postgresql://user@host/db`.',
    'TEMPORAL_RECALL_TASK_QUEUE': 'Task queue the worker polls (default `temporal-recall`).',
    'TEMPORAL_RECALL_AGENTS': 'Comma-separated `module:attribute` agents the worker serves (required, or `--demo`).',
    'TEMPORAL_RECALL_MODEL': 'Model for the demo agent: `scripted` (default, offline) or e.g. `openai:gpt-4o`.',
    'TEMPORAL_RECALL_HEALTH_PORT': 'Port of the worker `/healthz` and `/readyz` endpoint; unset disables it.',
    'TEMPORAL_RECALL_METRICS_PORT': "Port of the worker's Prometheus `/metrics` (the SDK's and recall's); unset: none.",
    'TEMPORAL_RECALL_LOG_LEVEL': 'Python log level of the worker (default `INFO`).',
    'TEMPORAL_RECALL_EMBEDDER': (
        'Embedding model for recall by meaning: `wordllama:l2_supercat_256` (offline, the `semantic` extra) or a '
        "pydantic-ai name such as `openai:text-embedding-3-small`; unset: an agent's own, else BM25 by default, "
        "and a search asking for meaning uses the model the store's vectors were made with."
    ),
    'TEMPORAL_RECALL_MESSAGE_CODEC': (
        'Keep message bodies in the store and only references in Temporal history (`true`/`false`).'
    ),
    'TEMPORAL_ADDRESS': "Temporal frontend `host:port` (Temporal's own variable; default `localhost:7233`).",
    'TEMPORAL_NAMESPACE': "Temporal namespace (Temporal's own variable; default `default`).",
}
"""Every variable temporal-recall reads, documented; `deploy/` files are tested against this list."""

DEFAULT_STORE_URL = 'sqlite:///temporal-recall.db'
DEFAULT_TASK_QUEUE = 'temporal-recall'
DEMO_AGENT = 'temporal_recall.demo:agent'
DEMO_STORE = Path('.demo') / 'recall.db'
"""Where `recall demo` keeps its store, under the working directory; a worker on it serves the demo agent."""


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Resolved worker and CLI settings."""

    store_url: str = DEFAULT_STORE_URL
    """Where conversations are stored. Default: a SQLite file in the working directory."""
    task_queue: str = DEFAULT_TASK_QUEUE
    """The Temporal task queue the worker polls and the CLI starts workflows on."""
    agents: tuple[str, ...] = ()
    """Import paths (`module:attribute`) of the agents the worker serves; none by default, which the worker refuses."""
    model: str = 'scripted'
    """The demo agent's model; `scripted` needs no API key and no network."""
    health_port: int | None = None
    """Port for `/healthz` and `/readyz`; `None` serves nothing."""
    metrics_port: int | None = None
    """Port of the Temporal runtime's Prometheus endpoint (the SDK's metrics and recall's); `None` serves none."""
    log_level: str = 'INFO'
    message_codec: bool = False
    embedder: str | None = None
    """The embedding model recall by meaning uses (worker, CLI, API); `None`: BM25 only."""
    """Whether clients and workers use `RecallDataCodec` (all of a namespace's must agree)."""
    temporal: dict[str, Any] = field(default_factory=dict[str, Any])
    """Keyword arguments for `temporalio.client.Client.connect`, from Temporal's environment config."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        from temporalio.envconfig import ClientConfig

        temporal = dict(ClientConfig.load_client_connect_config(override_env_vars=dict(env)))
        temporal.setdefault('target_host', 'localhost:7233')
        codec = (env.get('TEMPORAL_RECALL_MESSAGE_CODEC') or 'false').strip().lower()
        if codec not in ('true', 'false', '1', '0', 'yes', 'no'):
            raise ConfigurationError(f'TEMPORAL_RECALL_MESSAGE_CODEC must be true or false, got {codec!r}.')
        agents = tuple(a.strip() for a in env.get('TEMPORAL_RECALL_AGENTS', '').split(',') if a.strip())
        return cls(
            store_url=store_url_from_env(env),
            task_queue=env.get('TEMPORAL_RECALL_TASK_QUEUE') or DEFAULT_TASK_QUEUE,
            agents=agents,
            model=env.get('TEMPORAL_RECALL_MODEL') or 'scripted',
            health_port=_port(env, 'TEMPORAL_RECALL_HEALTH_PORT'),
            metrics_port=_port(env, 'TEMPORAL_RECALL_METRICS_PORT'),
            log_level=(env.get('TEMPORAL_RECALL_LOG_LEVEL') or 'INFO').upper(),
            message_codec=codec in ('true', '1', 'yes'),
            embedder=embedder_from_env(env),
            temporal=temporal,
        )


def store_url_from_env(environ: Mapping[str, str] | None = None) -> str:
    """`Settings.from_env().store_url` alone, for a command that needs no more (it reads no Temporal config)."""
    return (os.environ if environ is None else environ).get('TEMPORAL_RECALL_STORE') or DEFAULT_STORE_URL


def embedder_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """`Settings.from_env().embedder` alone, for a command that needs no more (it reads no Temporal config)."""
    return ((os.environ if environ is None else environ).get('TEMPORAL_RECALL_EMBEDDER') or '').strip() or None


def _port(env: Mapping[str, str], name: str) -> int | None:
    value = env.get(name) or None
    if value is None:
        return None
    if not value.isdigit() or not 0 < int(value) < 65536:
        raise ConfigurationError(f'{name} must be a TCP port number (1-65535), got {value!r}.')
    return int(value)
