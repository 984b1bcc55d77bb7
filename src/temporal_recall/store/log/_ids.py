"""Entry ids, revisions and timestamps the store mints, without pydantic-ai's private helpers.

More in docs/design/store.md.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from datetime import UTC, datetime

__all__ = ('new_id', 'now')

_VERSION_AND_VARIANT = (0x7 << 76) | (0b10 << 62)
_RANDOM_BITS = 74
_lock = threading.Lock()
_last = 0


def _next_value() -> int:
    global _last
    milliseconds = time.time_ns() // 1_000_000
    random = int.from_bytes(os.urandom(10), 'big') >> (80 - _RANDOM_BITS)
    value = (milliseconds << _RANDOM_BITS) | random
    with _lock:
        if value <= _last:
            value = _last + 1  # same millisecond (or a clock step back): count up from the last id
        _last = value
    return value


def new_id() -> str:
    """A new UUIDv7, as text."""
    value = _next_value()
    timestamp, rest = value >> _RANDOM_BITS, value & ((1 << _RANDOM_BITS) - 1)
    high, low = rest >> 62, rest & ((1 << 62) - 1)
    return str(uuid.UUID(int=(timestamp << 80) | _VERSION_AND_VARIANT | (high << 64) | low))


def now() -> datetime:
    """The current time, timezone-aware in UTC."""
    return datetime.now(UTC)
