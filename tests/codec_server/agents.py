"""An agent whose reasoning text appears only inside model messages, which the codec moves to the store.

The text sits next to a tool call in the model's first response, so it is in no tool argument, tool
result or final output: with the codec on, the history holds it only as a hash.
"""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import TemporalDurability
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart

from temporal_recall import ConversationRecall, RecallDeps
from temporal_recall.testing import scripted_model, text

LEDGER_TEXT = 'Consulting the Leith depot ledger for parcel P-7731'
"""Only ever inside a model response message."""


def lookup_parcel(parcel: str) -> str:
    """Where a parcel is."""
    return f'{parcel}: shelf 4.'


ledger_agent = Agent(
    scripted_model(
        ModelResponse(
            parts=[TextPart(LEDGER_TEXT), ToolCallPart('lookup_parcel', {'parcel': 'P-1'}, tool_call_id='c1')]
        ),
        text('On shelf 4.'),
    ),
    name='ledger',
    deps_type=RecallDeps,
    tools=[lookup_parcel],
    capabilities=[ConversationRecall(), TemporalDurability()],
)
