"""The payload codec that keeps Temporal history small by moving large payloads into the store.

`_tree` cuts a JSON payload into content-addressed bodies and puts it back together (pure); `_codec`
holds `RecallDataCodec`, which stores and caches those bodies, and `message_codec_plugin`, the one-line
opt-in. Codecs run in the client's and the worker's payload path, never in workflow code, so the
store I/O here never enters the sandbox.
"""

from __future__ import annotations

from ._codec import (
    ENCODING,
    MessageCodecPlugin,
    RecallDataCodec,
    UnencodablePayload,
    message_codec_plugin,
    payload_references,
)
from ._tree import CHUNK, MissingMessageBody

__all__ = (
    'CHUNK',
    'ENCODING',
    'MessageCodecPlugin',
    'MissingMessageBody',
    'RecallDataCodec',
    'UnencodablePayload',
    'message_codec_plugin',
    'payload_references',
)
