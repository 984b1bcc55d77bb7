"""Fixtures shared by the replay tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from temporal_recall import StoreProvider


class StoreThatMustNotBeCalled:
    """Fails on any use: replay must read activity results from history, never from the store."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.calls.append(name)
        raise AssertionError(f'replay touched the store: {name}')


@pytest.fixture
def forbidden_store() -> Iterator[StoreThatMustNotBeCalled]:
    provider = StoreProvider.default()
    store = StoreThatMustNotBeCalled()
    provider.configure(store=store)  # type: ignore[arg-type]
    yield store
    provider.configure('sqlite:///unused-after-replay.db')
