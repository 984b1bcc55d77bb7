"""The Temporal worker: `python -m temporal_recall.worker` or the `temporal-recall-worker` script."""

from ._build import SHIPPED_WORKFLOWS, build_worker, import_agents
from ._run import main, run_worker

__all__ = ('SHIPPED_WORKFLOWS', 'build_worker', 'import_agents', 'main', 'run_worker')
