"""Fixtures shared by the replay tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from temporal_recall import RecallPlugin


class StoreThatMustNotBeCalled:
    """Fails on any use: replay must read activity results from history, never from the store."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.calls.append(name)
        raise AssertionError(f'replay touched the store: {name}')


@pytest.fixture
def forbidden_store() -> Iterator[StoreThatMustNotBeCalled]:
    yield StoreThatMustNotBeCalled()


def store_plugin(store: StoreThatMustNotBeCalled) -> RecallPlugin:
    """A `RecallPlugin` on the replayer whose activities would reach `store` if replay ran any."""
    return RecallPlugin(store, include_shipped_workflows=False)
