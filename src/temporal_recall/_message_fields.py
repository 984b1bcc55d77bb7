"""The fields version 1 of the canonical message form was defined over: pydantic-ai 2.68's serialization.

A content hash must not move when a pydantic-ai release adds an optional field (2.78 added
`ModelResponse.duration`, `request_timestamp` and the tool parts' `ui_visibility`): the store keys
messages by it, and a workflow's history holds hashes its activities computed under the release that
recorded it. So the form is pinned to the fields below, read from the serialization schema of
`ModelMessagesTypeAdapter` in pydantic-ai 2.68.0 (the oldest release whose hashes a store may hold):
a field listed here is always part of the form, and any other field is part of it only once it holds
something other than its default. Under 2.68 that is exactly the serialization, so every hash stored
then still matches. Never edit these sets: a field a later release adds goes nowhere.
"""

from __future__ import annotations

__all__ = ('CONTENT_FIELDS', 'MESSAGE_FIELDS', 'PART_FIELDS')

MESSAGE_FIELDS: dict[str, frozenset[str]] = {
    'request': frozenset({'conversation_id', 'instructions', 'metadata', 'parts', 'run_id', 'state', 'timestamp'}),
    'response': frozenset(
        {
            'canonical_system',
            'conversation_id',
            'failed_attempts',
            'finish_reason',
            'history_digest',
            'metadata',
            'model_id',
            'model_name',
            'parts',
            'provider_details',
            'provider_name',
            'provider_response_id',
            'provider_url',
            'run_id',
            'state',
            'timestamp',
            'usage',
            'workspace_ref',
        }
    ),
}
"""A message's fields by its `kind`."""

PART_FIELDS: dict[str, frozenset[str]] = {
    'builtin-tool-call': frozenset(
        {'args', 'id', 'provider_details', 'provider_name', 'tool_call_id', 'tool_kind', 'tool_name'}
    ),
    'builtin-tool-return': frozenset(
        {
            'content',
            'metadata',
            'outcome',
            'provider_details',
            'provider_name',
            'timestamp',
            'tool_call_id',
            'tool_kind',
            'tool_name',
        }
    ),
    'capability-load-delta': frozenset({'loaded', 'tool_call_id'}),
    'compaction': frozenset({'content', 'id', 'metadata', 'provider_details', 'provider_name'}),
    'file': frozenset({'content', 'id', 'provider_details', 'provider_name'}),
    'instruction': frozenset({'content', 'dynamic', 'id', 'name', 'on_change'}),
    'instruction-baseline': frozenset({'instructions'}),
    'instruction-delta': frozenset({'base_hash', 'content', 'id'}),
    'instruction-digest': frozenset({'content_hash', 'dynamic', 'id'}),
    'model-settings-delta': frozenset({'settings', 'top_level'}),
    'retry-feedback': frozenset({'content', 'retry', 'timestamp'}),
    'retry-prompt': frozenset({'content', 'timestamp', 'tool_call_id', 'tool_name'}),
    'speech': frozenset(
        {'audio', 'id', 'interrupted_at_ms', 'provider_details', 'provider_name', 'speaker', 'timestamps', 'transcript'}
    ),
    'system-prompt': frozenset({'content', 'context_id', 'dynamic_ref', 'metadata', 'scope', 'timestamp'}),
    'text': frozenset({'citations', 'content', 'id', 'provider_details', 'provider_name'}),
    'thinking': frozenset({'content', 'id', 'provider_details', 'provider_name', 'signature'}),
    'tool-availability-delta': frozenset({'tool_call_id', 'tools_added'}),
    'tool-call': frozenset(
        {'args', 'id', 'provider_details', 'provider_name', 'tool_call_id', 'tool_kind', 'tool_name'}
    ),
    'tool-return': frozenset(
        {'content', 'metadata', 'outcome', 'retry', 'timestamp', 'tool_call_id', 'tool_kind', 'tool_name'}
    ),
    'user-prompt': frozenset({'content', 'timestamp'}),
}
"""A message part's fields by its `part_kind`."""

CONTENT_FIELDS: dict[str, frozenset[str]] = {
    'audio-url': frozenset({'force_download', 'identifier', 'media_type', 'url', 'vendor_metadata'}),
    'binary': frozenset({'data', 'identifier', 'media_type', 'vendor_metadata'}),
    'cache-point': frozenset({'ttl'}),
    'content': frozenset({'end', 'start'}),
    'document': frozenset({'document_id', 'excerpts', 'title'}),
    'document-url': frozenset({'force_download', 'identifier', 'media_type', 'url', 'vendor_metadata'}),
    'image-url': frozenset({'force_download', 'identifier', 'media_type', 'url', 'vendor_metadata'}),
    'marker': frozenset({'end', 'start'}),
    'structured-content': frozenset({'content', 'description', 'metadata', 'tag', 'value'}),
    'text-content': frozenset({'content', 'metadata'}),
    'uploaded-file': frozenset({'file_id', 'identifier', 'media_type', 'provider_name', 'vendor_metadata'}),
    'video-url': frozenset({'force_download', 'identifier', 'media_type', 'url', 'vendor_metadata'}),
    'web': frozenset({'excerpts', 'title', 'url'}),
}
"""The fields of a user prompt's content item (a URL, binary data, text content) by its `kind`."""
