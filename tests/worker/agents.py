"""An agent whose tool waits until cancelled, so a test can interrupt a worker with an activity in flight."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import TemporalDurability

from temporal_recall import ConversationRecall, RecallDeps
from temporal_recall.testing import scripted_model, text, tool_call


async def wait_for_ever() -> str:
    """Mark that the tool started, then wait until the activity is cancelled."""
    marker = os.environ.get('RECALL_TEST_TOOL_MARKER')
    if marker:
        Path(marker).write_text('started')
    await asyncio.Event().wait()
    return 'never'


waiting_agent = Agent(
    scripted_model(tool_call('wait_for_ever', {}), text('Done.')),
    name='waiting',
    deps_type=RecallDeps,
    tools=[wait_for_ever],
    capabilities=[ConversationRecall(), TemporalDurability()],
)
