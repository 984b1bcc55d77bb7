"""temporal-recall: durable pydantic-ai agents on Temporal that remember every message, once.

The public API is listed in `__all__`. Names are resolved lazily so that importing
`temporal_recall` (which Temporal's workflow sandbox does for every workflow module in this
package) never imports the store backends or their database drivers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._renamed import renamed_names

if TYPE_CHECKING:
    from ._metrics import prometheus_runtime
    from ._store_provider import StoreProvider
    from .activities import LOAD_HISTORY_ACTIVITY, SEARCH_ACTIVITY, RecallActivities
    from .capability import ConversationRecall
    from .codec import RecallDataCodec, message_codec_plugin
    from .errors import InvalidIdentifier, InvalidQuery, PruneRefused, RecallError, UnknownConversation
    from .models import (
        ConversationClosed,
        ConversationInput,
        HistoryWindow,
        LoadedHistory,
        RecallDeps,
        RunPromptInput,
        RunPromptOutput,
        SearchHit,
        SearchRequest,
        SearchResult,
        TurnInput,
        TurnOutput,
    )
    from .query import (
        ANY_SCOPE,
        ConversationInfo,
        ConversationPage,
        Transcript,
        TranscriptMessage,
        list_conversation_page,
        list_conversations,
        read_conversation,
        search_messages,
    )
    from .search import Role
    from .search.plan import search_index
    from .settings import Settings
    from .store import PostgresConversationStore, SqliteConversationStore, open_store
    from .worker import RecallPlugin, build_worker
    from .workflows import ConversationWorkflow, RunPromptWorkflow, load_history, recall

__all__ = (
    'ANY_SCOPE',
    'LOAD_HISTORY_ACTIVITY',
    'SEARCH_ACTIVITY',
    'ConversationClosed',
    'ConversationInfo',
    'ConversationInput',
    'ConversationPage',
    'ConversationRecall',
    'ConversationWorkflow',
    'HistoryWindow',
    'InvalidIdentifier',
    'InvalidQuery',
    'LoadedHistory',
    'PostgresConversationStore',
    'PruneRefused',
    'RecallActivities',
    'RecallDataCodec',
    'RecallDeps',
    'RecallError',
    'RecallPlugin',
    'Role',
    'RunPromptInput',
    'RunPromptOutput',
    'RunPromptWorkflow',
    'SearchHit',
    'SearchRequest',
    'SearchResult',
    'Settings',
    'SqliteConversationStore',
    'StoreProvider',
    'Transcript',
    'TranscriptMessage',
    'TurnInput',
    'TurnOutput',
    'UnknownConversation',
    'build_worker',
    'list_conversation_page',
    'list_conversations',
    'load_history',
    'message_codec_plugin',
    'open_store',
    'prometheus_runtime',
    'read_conversation',
    'recall',
    'search_index',
    'search_messages',
)

_LOCATIONS = {
    'ConversationRecall': '.capability',
    'RecallDataCodec': '.codec',
    'message_codec_plugin': '.codec',
    'prometheus_runtime': '._metrics',
    'search_index': '.search.plan',
    'StoreProvider': '._store_provider',
    'LOAD_HISTORY_ACTIVITY': '.activities',
    'SEARCH_ACTIVITY': '.activities',
    'RecallActivities': '.activities',
    'RecallError': '.errors',
    'InvalidIdentifier': '.errors',
    'InvalidQuery': '.errors',
    'PruneRefused': '.errors',
    'UnknownConversation': '.errors',
    'LoadedHistory': '.models',
    'Role': '.search',
    'PostgresConversationStore': '.store',
    'ConversationInput': '.models',
    'ConversationClosed': '.models',
    'HistoryWindow': '.models',
    'RecallDeps': '.models',
    'RunPromptInput': '.models',
    'RunPromptOutput': '.models',
    'SearchRequest': '.models',
    'SearchResult': '.models',
    'TurnInput': '.models',
    'TurnOutput': '.models',
    'SearchHit': '.models',
    'ANY_SCOPE': '.query',
    'ConversationInfo': '.query',
    'ConversationPage': '.query',
    'Transcript': '.query',
    'TranscriptMessage': '.query',
    'list_conversation_page': '.query',
    'list_conversations': '.query',
    'read_conversation': '.query',
    'search_messages': '.query',
    'Settings': '.settings',
    'SqliteConversationStore': '.store',
    'open_store': '.store',
    'build_worker': '.worker',
    'RecallPlugin': '.worker',
    'ConversationWorkflow': '.workflows',
    'RunPromptWorkflow': '.workflows',
    'load_history': '.workflows',
    'recall': '.workflows',
}


_RENAMED = {'ConversationSummary': 'ConversationClosed', 'search_history': 'search_index'}
"""Names renamed in this release, kept for one more: each access warns and gives the new name's object."""


def _lazy(name: str) -> Any:
    module = _LOCATIONS.get(name)
    if module is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


_old_name = renamed_names(__name__, _RENAMED, _lazy)


def __getattr__(name: str) -> Any:
    return _old_name(name) if name in _RENAMED else _lazy(name)


def __dir__() -> list[str]:
    return sorted(__all__)
