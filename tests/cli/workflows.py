"""A tiny workflow for `recall export-history` to export (no agent, no store)."""

from __future__ import annotations

from temporalio import workflow


@workflow.defn(name='tests.cli.Greet')
class GreetWorkflow:
    @workflow.run
    async def run(self, name: str) -> str:
        return f'Hello, {name}!'
