"""What of each pydantic-ai message type is searchable, and who is said to have spoken it."""

from __future__ import annotations

import pytest
from pydantic_ai import messages as m
from pydantic_ai._warnings import PydanticAIDeprecationWarning

from temporal_recall.search import is_summary, message_role, searchable_text, transcript_text
from temporal_recall.text._documents import MAX_ATTACHMENT_BYTES, SUMMARY_METADATA

PNG = m.BinaryContent(data=b'\x89PNG\r\n\x1a\nsecretpixels', media_type='image/png')


def request(*parts: m.ModelRequestPart) -> m.ModelRequest:
    return m.ModelRequest(parts=list(parts))


def response(*parts: m.ModelResponsePart) -> m.ModelResponse:
    return m.ModelResponse(parts=list(parts))


def test_user_prompt_with_text() -> None:
    message = request(m.UserPromptPart('Where is the invoice?'))
    assert searchable_text(message) == 'Where is the invoice?'
    assert message_role(message) == 'user'
    assert not is_summary(message)


def test_user_prompt_with_a_list_leaves_binary_content_out() -> None:
    message = request(m.UserPromptPart(['Look at this chart', PNG, m.TextContent('and this caption')]))
    text = searchable_text(message)
    assert text == 'Look at this chart\nand this caption'
    assert 'secretpixels' not in text
    assert 'PNG' not in text
    assert message_role(message) == 'user'


def test_system_prompt() -> None:
    message = request(m.SystemPromptPart('You are a billing assistant.'))
    assert searchable_text(message) == 'You are a billing assistant.'
    assert message_role(message) == 'system'


def test_user_prompt_wins_the_role_over_a_system_prompt() -> None:
    message = request(m.SystemPromptPart('Be brief.'), m.UserPromptPart('Hi'))
    assert message_role(message) == 'user'
    assert searchable_text(message) == 'Be brief.\nHi'


def test_text_part_is_searchable_and_thinking_is_not() -> None:
    message = response(m.ThinkingPart('private chain of thought'), m.TextPart('The total is 42 EUR.'))
    assert searchable_text(message) == 'The total is 42 EUR.'
    assert message_role(message) == 'assistant'


def test_thinking_only_response_has_no_text() -> None:
    assert searchable_text(response(m.ThinkingPart('hmm'))) == ''


def test_tool_call_with_dict_args() -> None:
    message = response(m.ToolCallPart(tool_name='lookup_invoice', args={'number': 4521, 'city': 'Zürich'}))
    text = searchable_text(message)
    assert 'lookup_invoice' in text
    assert '"number": 4521' in text
    assert 'Zürich' in text
    assert message_role(message) == 'assistant'


def test_tool_call_with_str_args() -> None:
    message = response(m.ToolCallPart(tool_name='lookup_invoice', args='{"number": 4521}'))
    assert searchable_text(message) == 'lookup_invoice\n{"number": 4521}'


def test_tool_return() -> None:
    message = request(m.ToolReturnPart(tool_name='lookup_invoice', content={'status': 'paid', 'amount': 99}))
    text = searchable_text(message)
    assert text.startswith('lookup_invoice\n')
    assert '"status": "paid"' in text
    assert message_role(message) == 'tool'


def test_tool_return_leaves_binary_content_out() -> None:
    message = request(m.ToolReturnPart(tool_name='render', content=['rendered chart', PNG]))
    text = searchable_text(message)
    assert 'rendered chart' in text
    assert 'secretpixels' not in text


def test_tool_return_that_is_only_binary() -> None:
    assert searchable_text(request(m.ToolReturnPart(tool_name='render', content=PNG))) == 'render'


def test_retry_prompt_part() -> None:
    with pytest.warns(PydanticAIDeprecationWarning):
        part = m.RetryPromptPart(  # pyright: ignore[reportDeprecated] - older histories still hold it
            content='Invoice number must be numeric.', tool_name='lookup_invoice'
        )
    message = request(part)
    assert 'Invoice number must be numeric.' in searchable_text(message)
    assert message_role(message) == 'tool'


def test_retry_feedback_part() -> None:
    message = request(m.RetryFeedbackPart(content='Please answer in JSON.', retry=m.RetryInfo(cause='model_retry')))
    assert searchable_text(message) == 'Please answer in JSON.'
    assert message_role(message) == 'tool'


def test_stored_retry_prompts_load_as_searchable_parts() -> None:
    stored = (
        b'[{"kind": "request", "parts": [{"part_kind": "retry-prompt", "content": "bad number",'
        b' "tool_name": "lookup_invoice", "tool_call_id": "call-1"}]},'
        b' {"kind": "request", "parts": [{"part_kind": "retry-prompt", "content": "answer please"}]}]'
    )
    with_tool, without_tool = m.ModelMessagesTypeAdapter.validate_json(stored)
    assert 'bad number' in searchable_text(with_tool)
    assert searchable_text(without_tool) == 'answer please'
    assert message_role(with_tool) == message_role(without_tool) == 'tool'


def test_compaction_summary_is_recognised_and_not_searchable() -> None:
    message = response(m.CompactionPart(content='Summary: the user asked about invoice 4521.'))
    assert is_summary(message)
    assert searchable_text(message) == ''


@pytest.mark.parametrize(
    'message',
    [
        request(m.UserPromptPart('hi')),
        response(m.TextPart('hello')),
        response(m.ToolCallPart(tool_name='t', args={})),
    ],
)
def test_ordinary_messages_are_not_summaries(message: m.ModelMessage) -> None:
    assert not is_summary(message)


def test_recall_tool_returns_are_not_searchable_but_its_calls_are():
    from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart

    from temporal_recall.search import searchable_text
    from temporal_recall.text._documents import RECALL_TOOL_NAME

    returned = ModelRequest(
        parts=[ToolReturnPart(RECALL_TOOL_NAME, '[1] you said: invoice INV-7731', tool_call_id='r')]
    )
    called = ModelResponse(parts=[ToolCallPart(RECALL_TOOL_NAME, {'query': 'invoice'}, tool_call_id='r')])
    assert searchable_text(returned) == ''
    assert 'invoice' in searchable_text(called)


def test_a_transcript_shows_what_search_leaves_out_on_purpose():
    """`recall show`, the API and the demo display recall returns and summaries; search skips them."""
    from temporal_recall.search import transcript_text
    from temporal_recall.text._documents import RECALL_TOOL_NAME

    returned = request(m.ToolReturnPart(RECALL_TOOL_NAME, '[1] you said: invoice INV-7731', tool_call_id='r'))
    summary = response(m.CompactionPart(content='Summary: the user asked about invoice 4521.'))
    plain = request(m.UserPromptPart('where is my parcel?'), m.SystemPromptPart('be brief'))
    assert transcript_text(returned) == f'{RECALL_TOOL_NAME}\n[1] you said: invoice INV-7731'
    assert transcript_text(summary) == 'Summary: the user asked about invoice 4521.'
    assert transcript_text(plain) == searchable_text(plain)
    assert transcript_text(request(m.UserPromptPart([PNG]))) == ''


# --- summaries in every known shape ------------------------------------------------------------

HARNESS_SUMMARY = 'Summary of previous conversation:\n\nThe user asked about invoice 4521.'


@pytest.mark.parametrize(
    'summary',
    [
        pytest.param(response(m.CompactionPart(content='The user asked about invoice 4521.')), id='compaction-part'),
        pytest.param(
            request(m.CompactionPart(content='The user asked about invoice 4521.', metadata={'x': True})),
            id='compaction-part-in-a-request',
        ),
        pytest.param(request(m.SystemPromptPart(HARNESS_SUMMARY)), id='harness-system-prompt'),
        pytest.param(
            request(m.UserPromptPart([m.TextContent(HARNESS_SUMMARY, metadata=dict(SUMMARY_METADATA))])),
            id='harness-marked-user-turn',
        ),
    ],
)
def test_summaries_in_every_known_shape_are_not_searchable(summary: m.ModelMessage) -> None:
    assert is_summary(summary)
    assert searchable_text(summary) == ''
    assert 'invoice 4521' in transcript_text(summary)  # still shown to a person reading the conversation


@pytest.mark.parametrize(
    'lookalike',
    [
        pytest.param(
            request(m.SystemPromptPart('Summary of previous conversation: the ONYX migration is done.')),
            id='system-prompt-without-the-blank-line',
        ),
        pytest.param(
            request(m.SystemPromptPart('Summary of previous conversation:\n\nthe ONYX plan', dynamic_ref='notes')),
            id='dynamic-system-prompt',
        ),
        pytest.param(request(m.UserPromptPart('Summary of previous conversation:\n\nthe ONYX plan')), id='user-text'),
        pytest.param(
            request(m.UserPromptPart([m.TextContent('Summary of previous conversation:\n\nthe ONYX plan')])),
            id='user-text-item-without-the-marker',
        ),
        pytest.param(
            request(
                m.UserPromptPart(
                    [m.TextContent('Summary of previous conversation:\n\nthe ONYX plan', metadata={'mine': True})]
                )
            ),
            id='user-text-item-with-other-metadata',
        ),
    ],
)
def test_a_look_alike_of_a_summary_stays_searchable(lookalike: m.ModelMessage) -> None:
    assert not is_summary(lookalike)
    assert 'ONYX' in searchable_text(lookalike)


def test_a_summary_part_leaves_the_other_parts_of_its_message_searchable() -> None:
    message = request(m.SystemPromptPart(HARNESS_SUMMARY), m.UserPromptPart('where is parcel 77?'))
    assert is_summary(message)
    assert searchable_text(message) == 'where is parcel 77?'


def test_an_application_declares_its_own_summary_shape() -> None:
    def mine(message: m.ModelMessage) -> bool:
        return any(
            isinstance(part, m.SystemPromptPart) and (part.metadata or {}).get('digest') for part in message.parts
        )

    digest = request(m.SystemPromptPart('Earlier: invoice 4521 was paid.', metadata={'digest': True}))
    plain = request(m.SystemPromptPart('Earlier: invoice 4521 was paid.'))
    assert searchable_text(digest, summary=mine) == ''
    assert searchable_text(plain, summary=mine) == 'Earlier: invoice 4521 was paid.'
    assert searchable_text(digest) == 'Earlier: invoice 4521 was paid.'  # without the rule, an ordinary prompt


# --- every part that carries words -------------------------------------------------------------


def test_speech_transcripts_are_searchable_and_the_audio_is_not() -> None:
    audio = m.BinaryContent(data=b'RIFFsecretaudio', media_type='audio/wav')
    heard = request(m.SpeechPart(speaker='user', transcript='My parcel number is 77.', audio=audio))
    spoken = response(m.SpeechPart(speaker='assistant', transcript='Parcel 77 ships today.'))
    untranscribed = request(m.SpeechPart(speaker='user', audio=audio))
    assert searchable_text(heard) == 'My parcel number is 77.'
    assert message_role(heard) == 'user'
    assert searchable_text(spoken) == 'Parcel 77 ships today.'
    assert message_role(spoken) == 'assistant'
    assert searchable_text(untranscribed) == ''


def test_text_attachments_are_searchable_up_to_the_documented_size() -> None:
    notes = m.BinaryContent(data=b'Meeting notes: move the launch to Thursday.', media_type='text/plain')
    latin = m.BinaryContent(data='Adresse: Hauptstraße 5'.encode('latin-1'), media_type='text/csv; charset=latin-1')
    assert 'launch to Thursday' in searchable_text(request(m.UserPromptPart(['See attached', notes])))
    assert 'Hauptstraße 5' in searchable_text(request(m.UserPromptPart([latin])))
    returned = request(m.ToolReturnPart(tool_name='read_file', content=notes))
    assert searchable_text(returned) == 'read_file\nMeeting notes: move the launch to Thursday.'
    listed = request(m.ToolReturnPart(tool_name='read_file', content=['two files:', notes, PNG]))
    assert 'launch to Thursday' in searchable_text(listed)
    assert 'secretpixels' not in searchable_text(listed)
    produced = response(m.FilePart(content=m.BinaryContent(data=b'col_a,col_b\n1,2', media_type='text/csv')))
    assert searchable_text(produced) == 'col_a,col_b\n1,2'
    assert searchable_text(response(m.FilePart(content=PNG))) == ''

    big = m.BinaryContent(data=b'head ' + b'x' * MAX_ATTACHMENT_BYTES + b' tailword', media_type='text/plain')
    text = searchable_text(request(m.UserPromptPart([big])))
    assert text.startswith('head ')
    assert 'tailword' not in text
    assert len(text.encode()) <= MAX_ATTACHMENT_BYTES


def test_other_binary_media_types_are_not_read() -> None:
    pdf = m.BinaryContent(data=b'%PDF-1.7 secretwords', media_type='application/pdf')
    assert searchable_text(request(m.UserPromptPart(['the contract', pdf]))) == 'the contract'


def test_tool_names_are_searchable_for_calls_and_returns() -> None:
    assert searchable_text(response(m.ToolCallPart(tool_name='get_weather', args={}))).startswith('get_weather')
    assert searchable_text(request(m.ToolReturnPart(tool_name='get_weather', content='sunny'))) == 'get_weather\nsunny'
