"""`resent_hash`: a message sent back through a Vercel AI or AG-UI client matches the one stored; an edit does not."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pydantic
import pytest
from ag_ui.core import Message
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.ui.ag_ui import AGUIAdapter
from pydantic_ai.ui.vercel_ai import VercelAIAdapter
from pydantic_ai.ui.vercel_ai.request_types import UIMessage
from pydantic_ai.usage import RequestUsage

from temporal_recall.content import content_hash, resent_hash

AT = datetime(2026, 1, 1, tzinfo=UTC)

CONVERSATION: list[ModelMessage] = [
    ModelRequest(
        parts=[UserPromptPart('Where is order A-1001?', timestamp=AT)],
        timestamp=AT,
        run_id='r1',
        conversation_id='c',
        metadata={'app': 1},
    ),
    ModelResponse(
        parts=[
            ThinkingPart('Look it up.', id='th1', signature='sig', provider_name='openai'),
            TextPart('Looking.', id='t1', provider_name='openai', provider_details={'phase': 'final'}),
            ToolCallPart(
                'lookup_order', '{"order": "A-1001"}', tool_call_id='call-1', id='fc1', provider_name='openai'
            ),
        ],
        usage=RequestUsage(input_tokens=10, output_tokens=5),
        model_name='gpt-x',
        model_id='openai:gpt-x',
        timestamp=AT,
        provider_name='openai',
        provider_url='https://api.example',
        provider_details={'service_tier': 'default'},
        provider_response_id='resp_1',
        finish_reason='tool_call',
        run_id='r1',
        conversation_id='c',
        metadata={'app': 2},
        canonical_system='openai',
        history_digest='digest',
    ),
    ModelRequest(
        parts=[
            ToolReturnPart('lookup_order', 'A-1001: shipped', tool_call_id='call-1', timestamp=AT, metadata={'x': 1})
        ],
        timestamp=AT,
        run_id='r1',
    ),
    ModelResponse(parts=[TextPart('It shipped.')], model_name='gpt-x', finish_reason='stop', timestamp=AT, run_id='r1'),
]
"""A turn with every field a provider fills in, as the run keeps it."""


def _round_trip(protocol: str, messages: list[ModelMessage]) -> list[ModelMessage]:
    """`messages` shown in the UI, serialized to the client and sent back, as an adapter reloads them."""
    if protocol == 'vercel':
        ui: Any = pydantic.TypeAdapter(list[UIMessage])
        wire = ui.dump_json(VercelAIAdapter.dump_messages(messages), by_alias=True)
        return VercelAIAdapter.load_messages(ui.validate_json(wire))
    agui: Any = pydantic.TypeAdapter(list[Message])
    wire = agui.dump_json(AGUIAdapter.dump_messages(messages), by_alias=True)
    return AGUIAdapter.load_messages(agui.validate_json(wire))


@pytest.mark.parametrize('protocol', ['vercel', 'agui'])
def test_a_round_trip_changes_content_hashes_but_not_resent_hashes(protocol: str):
    back = _round_trip(protocol, CONVERSATION)
    assert len(back) == len(CONVERSATION)
    assert [content_hash(m) for m in back] != [content_hash(m) for m in CONVERSATION]
    assert [resent_hash(m) for m in back] == [resent_hash(m) for m in CONVERSATION]


EDITS = {
    'user text': (0, lambda m: replace(m, parts=[UserPromptPart('Where is order A-1002?', timestamp=AT)])),
    'thinking': (1, lambda m: replace(m, parts=[replace(m.parts[0], content='Guess.'), *m.parts[1:]])),
    'text': (1, lambda m: replace(m, parts=[m.parts[0], replace(m.parts[1], content='Not looking.'), m.parts[2]])),
    'tool args': (1, lambda m: replace(m, parts=[*m.parts[:2], replace(m.parts[2], args={'order': 'A-1002'})])),
    'tool call id': (1, lambda m: replace(m, parts=[*m.parts[:2], replace(m.parts[2], tool_call_id='call-2')])),
    'tool result': (2, lambda m: replace(m, parts=[replace(m.parts[0], content='A-1001: lost')])),
    'answer': (3, lambda m: replace(m, parts=[TextPart('It is lost.')])),
}


@pytest.mark.parametrize('edit', sorted(EDITS))
def test_an_edit_of_what_was_said_is_no_resend(edit: str):
    index, change = EDITS[edit]
    assert resent_hash(change(CONVERSATION[index])) != resent_hash(CONVERSATION[index])
