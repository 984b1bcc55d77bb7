"""A workflow that reports which modules Temporal's sandbox holds after importing what a user's
workflow module would import from temporal-recall."""

from __future__ import annotations

import sys

from temporalio import workflow

import temporal_recall.models
import temporal_recall.search
import temporal_recall.workflows  # noqa: F401

FORBIDDEN = ('aiosqlite', 'asyncpg', 'sqlite3', 'temporal_recall.store.sqlite', 'temporal_recall.store.postgres')


@workflow.defn(name='tests.SandboxModules')
class SandboxModulesWorkflow:
    @workflow.run
    async def run(self) -> list[str]:
        return sorted(name for name in sys.modules if name.startswith(FORBIDDEN))
