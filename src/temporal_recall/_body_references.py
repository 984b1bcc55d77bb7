"""How a codec body names the bodies it is made of, written once for the codec and the store's check.

A body is JSON in which `{"$recall": h}` stands for body `h`, and a list item `{"$recall-items": h}`
for the items of body `h` (a list) spliced in place. The codec (`codec/_tree.py`) writes and follows
these references; `recall check` (the store) verifies that every body a stored body references is
stored in the same scope. Pure, and importing nothing of the package, so the store may use it.
"""

from __future__ import annotations

from typing import Any

__all__ = ('REF', 'RESERVED', 'SPLICE', 'reference', 'references_in')

REF = '$recall'
SPLICE = '$recall-items'
RESERVED = (REF, SPLICE)


def reference(value: Any, key: str = REF) -> str | None:
    """The hash `value` refers to under `key`, if it is exactly such a reference."""
    if isinstance(value, dict) and len(value) == 1:  # pyright: ignore[reportUnknownArgumentType]
        digest = value.get(key)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if isinstance(digest, str):
            return digest
    return None


def references_in(value: Any, found: set[str]) -> None:
    """Add to `found` every hash that `value` (a decoded body or payload) references."""
    if isinstance(value, dict):
        digest = reference(value) or reference(value, SPLICE)
        if digest is not None:
            found.add(digest)
            return
        for item in value.values():  # pyright: ignore[reportUnknownVariableType]
            references_in(item, found)
    elif isinstance(value, list):
        for item in value:  # pyright: ignore[reportUnknownVariableType]
            references_in(item, found)
