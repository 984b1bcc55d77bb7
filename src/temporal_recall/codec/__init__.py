"""The payload codec that keeps Temporal history small by moving large payloads into the store.

- `_tree`: the body tree, pure: how a JSON payload is cut into content-addressed bodies (each
  message, each fixed chunk of a long list, each large subtree) and put back together.
- `_codec`: `RecallDataCodec`, which reads and writes those bodies in the conversation store and
  caches them, and `message_codec_plugin`, the one-line opt-in for a client, its workers and the
  Replayer.

Codecs run in the client and the worker's payload path, never in workflow code, so the store I/O
here never enters the workflow sandbox.
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
