"""Old public names kept for one release after a rename: each access warns and gives the new name's object.

Each module that renamed a name sets `__getattr__ = renamed_names(__name__, {old: new}, find)`, where
`find(new)` returns the new name's object (the module's own global, or its lazy import).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ('deprecated_include_branches', 'renamed_names', 'warn_renamed_argument')


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


def warn_renamed_argument(owner: str, old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn that `owner` took an argument by its old name `old`, now `new` (kept working for one release)."""
    warnings.warn(
        f'{owner}: `{old}` is renamed `{new}`; the old name goes in the next release.',
        DeprecationWarning,
        stacklevel=stacklevel,
    )


def deprecated_include_branches(owner: str, include_branches: bool | None) -> bool:
    """The value of a function's deprecated `include_branches` argument (`None`: not given), warning when given.

    `include_branches` became `include_superseded` when a default search started to see every branch a
    conversation left: what it adds now is only what was superseded inside one run.
    """
    if include_branches is None:
        return False
    warn_renamed_argument(owner, 'include_branches', 'include_superseded', stacklevel=4)
    return include_branches
