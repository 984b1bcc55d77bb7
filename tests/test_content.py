"""A content hash names what a message says, whatever pydantic-ai release serialised it (canonical form 2)."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from pathlib import Path

from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelResponse, TextPart, ToolCallPart

from temporal_recall.content import CANONICAL_FORM, content_hash, form_1_hashes

RECORDED = json.loads((Path(__file__).parent / 'data' / 'hashes_pydantic_ai_2_68.json').read_text())
"""Messages pydantic-ai 2.68.0 serialised, with the hashes 779acbc gave them under 2.68 (what stores hold)."""


def test_a_message_stored_under_pydantic_ai_2_68_hashes_as_it_did_then():
    assert CANONICAL_FORM == 2
    for recorded in RECORDED:
        message = ModelMessagesTypeAdapter.validate_python([recorded['message']])[0]
        assert content_hash(message) == recorded['content_hash'], recorded['message']['kind']


def test_fields_a_release_adds_count_only_once_they_hold_something():
    response = ModelResponse(parts=[ToolCallPart('lookup', {'order': 'A-1042'}, tool_call_id='c1')], model_name='m')
    base = content_hash(response)
    # When the request was sent and how long it took are stamps, like the timestamp.
    assert content_hash(dataclasses.replace(response, duration=timedelta(seconds=2))) == base
    hidden = dataclasses.replace(response.parts[0], ui_visibility='private')
    assert content_hash(dataclasses.replace(response, parts=[hidden])) != base
    assert content_hash(dataclasses.replace(response, parts=[TextPart('other')])) != base


def test_a_step_marker_recorded_before_form_2_is_recognised_by_its_form_1_hashes():
    for recorded in RECORDED:
        message = ModelMessagesTypeAdapter.validate_python([recorded['message']])[0]
        assert recorded['content_hash'] in form_1_hashes(message)
    # An output tool call that pydantic-ai 2.78 stamped in workflow code still has the hash 2.68 gave it unstamped.
    call = ModelMessagesTypeAdapter.validate_python([RECORDED[5]['message']])[0]
    stamped = dataclasses.replace(call, parts=[dataclasses.replace(call.parts[0], tool_kind='output')])
    assert content_hash(stamped) != RECORDED[5]['content_hash']
    assert RECORDED[5]['content_hash'] in form_1_hashes(stamped)
