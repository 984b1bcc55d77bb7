"""The Temporal worker: `RecallPlugin`, `build_worker`, and the `temporal-recall-worker` process."""

from ._build import build_worker, import_agents
from ._plugin import SHIPPED_WORKFLOWS, RecallPlugin
from ._run import main, run_worker

__all__ = ('SHIPPED_WORKFLOWS', 'RecallPlugin', 'build_worker', 'import_agents', 'main', 'run_worker')
