"""Old public names kept for one release after a rename: each access warns and gives the new name's object.

Each module that renamed a name sets `__getattr__ = renamed_names(__name__, {old: new}, find)`, where
`find(new)` returns the new name's object (the module's own global, or its lazy import).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ('renamed_names',)


def renamed_names(module: str, renamed: Mapping[str, str], find: Callable[[str], Any]) -> Callable[[str], Any]:
    """A module `__getattr__` serving each old name of `renamed` as its new one, with a `DeprecationWarning`."""

    def __getattr__(name: str) -> Any:
        new = renamed.get(name)
        if new is None:
            raise AttributeError(f'module {module!r} has no attribute {name!r}')
        warnings.warn(
            f'{module}.{name} is renamed {new}; the old name goes in the next release.',
            DeprecationWarning,
            stacklevel=2,
        )
        return find(new)

    return __getattr__
