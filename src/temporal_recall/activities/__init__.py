"""Store-backed Temporal activities and their pinned names."""

from ._names import LOAD_HISTORY_ACTIVITY, SEARCH_ACTIVITY, STORE_STEP_OPERATION
from ._recall_activities import MAX_HISTORY_PAYLOAD_BYTES, RecallActivities

__all__ = (
    'LOAD_HISTORY_ACTIVITY',
    'MAX_HISTORY_PAYLOAD_BYTES',
    'SEARCH_ACTIVITY',
    'STORE_STEP_OPERATION',
    'RecallActivities',
)
