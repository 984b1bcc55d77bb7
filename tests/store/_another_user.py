"""Run a check as a user that file permissions apply to, even when the tests run as root.

Root ignores file permissions, and the machines this project is built and tested on run as root, so
a store on a file nobody may write is checked in a child process that has given up root for the
`nobody` user. The child is forked rather than started afresh: `nobody` may not be able to read the
interpreter or the installed packages (here they live under /root), and a fork already holds them.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import pwd
import warnings
from collections.abc import Callable, Coroutine
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

P = ParamSpec('P')
T = TypeVar('T')

NOBODY = 'nobody'


def another_user() -> tuple[int, int] | None:
    """`(uid, gid)` the child runs as when the tests run as root; `None` when they do not (they need no switch)."""
    if os.geteuid() != 0:
        return None
    nobody = pwd.getpwnam(NOBODY)
    return nobody.pw_uid, nobody.pw_gid


def give_to_another_user(path: Path) -> None:
    """Make `path` belong to the user `as_another_user` runs as (it is already theirs when not root)."""
    user = another_user()
    if user is not None:
        os.chown(path, *user)


def as_another_user(check: Callable[P, Coroutine[Any, Any, T]], *args: P.args, **kwargs: P.kwargs) -> T:
    """`check(...)` run to completion in a forked child without root; its result, or its exception raised here.

    Arguments, result and exception cross the process boundary by pickling.
    """
    with warnings.catch_warnings():
        # Python 3.12+ warns about forking a process that has threads (the test session may run a
        # Temporal runtime). The child only runs `check`, which starts any threads it needs itself.
        warnings.filterwarnings('ignore', r'This process .* is multi-threaded', DeprecationWarning)
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context('fork'), initializer=_drop_root) as pool:
            return pool.submit(_run, check, *args, **kwargs).result()


def _run(check: Callable[P, Coroutine[Any, Any, T]], *args: P.args, **kwargs: P.kwargs) -> T:
    return asyncio.run(check(*args, **kwargs))


def _drop_root() -> None:
    user = another_user()
    if user is None:
        return
    uid, gid = user
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    assert (os.getuid(), os.geteuid()) == (uid, uid)  # root cannot be taken back: permissions now apply
