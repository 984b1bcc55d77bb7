"""The demo agent: a support assistant with an order-lookup tool and recall.

Defined at module level, outside any workflow module, so Temporal's sandbox imports it once
through `imports_passed_through()` instead of rebuilding it on every workflow task.
"""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import TemporalDurability

from ..capability import ConversationRecall
from ..models import RecallDeps
from ..settings import Settings
from ._scripted_model import scripted_model

__all__ = ('agent', 'build_agent')


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
        capabilities=[ConversationRecall(), TemporalDurability()],
    )


agent = build_agent(Settings.from_env().model)
