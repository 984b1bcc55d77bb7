"""A workflow that runs an agent by itself, for a worker that has the agent's activities but no `RecallPlugin`."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from temporal_recall.models import RecallDeps

    from ..workflows.agents import weather_agent


@workflow.defn(name='tests.WeatherWithoutPlugin')
class WeatherWithoutPlugin:
    @workflow.run
    async def run(self, conversation_id: str) -> str:
        result = await weather_agent.run('Weather in Paris?', conversation_id=conversation_id, deps=RecallDeps())
        return result.output
