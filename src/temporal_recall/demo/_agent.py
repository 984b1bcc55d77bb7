"""The demo agent: a support assistant with an order-lookup tool and recall.

Defined at module level, outside any workflow module, so Temporal's sandbox imports it once
through `imports_passed_through()` instead of rebuilding it on every workflow task.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import TemporalDurability
from temporalio.workflow import ActivityConfig

from ..capability import ConversationRecall
from ..models import RecallDeps
from ..settings import Settings
from ._scripted_model import scripted_model

__all__ = ('ACTIVITY_CONFIG', 'agent', 'build_agent')

ACTIVITY_CONFIG = ActivityConfig(start_to_close_timeout=timedelta(seconds=60), heartbeat_timeout=timedelta(seconds=10))
"""Every activity of the agent (model requests, tools, `store_step`) heartbeats (pydantic-ai does it), so a
10 s heartbeat timeout has Temporal retry a killed worker's activity elsewhere within about 12 s, instead
of after the 30 s model-request heartbeat timeout or the 60 s start-to-close of a tool (see the README's
*Recovery after a worker dies*). The start-to-close keeps pydantic-ai's default."""


def lookup_order(order_id: str) -> str:
    """Look up the status of an order by its id."""
    # Deterministic stand-in for a real order system.
    statuses = ('packed', 'shipped', 'out for delivery', 'delivered')
    status = statuses[sum(map(ord, order_id)) % len(statuses)]
    return f'order {order_id} is {status}'


def build_agent(model: str = 'scripted', *, name: str = 'demo') -> Agent[RecallDeps, str]:
    return Agent(
        scripted_model() if model == 'scripted' else model,
        name=name,
        deps_type=RecallDeps,
        instructions='You are a concise support assistant. Use search_conversation_history to recall earlier turns.',
        tools=[lookup_order],
        capabilities=[ConversationRecall(), TemporalDurability(activity_config=ACTIVITY_CONFIG)],
    )


agent = build_agent(Settings.from_env().model)
