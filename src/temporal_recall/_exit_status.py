"""Exit statuses of temporal-recall's processes (`recall` and the worker), and how they leave, written once for both."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import traceback
from collections.abc import Callable
from typing import NoReturn

__all__ = ('EXIT_FAILURE', 'EXIT_INTERRUPTED', 'EXIT_USAGE', 'exit_without_finalizing')

EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
"""The shell's status for a process ended by SIGINT (128 + 2), which `recall` and the worker exit with."""


def exit_without_finalizing(main: Callable[[], int]) -> NoReturn:
    """Run `main` and end the process with its status through `os._exit`, whatever happens on the way out.

    A process that used a Temporal client or worker must not go through interpreter finalization:
    the SDK's Rust core keeps native threads (its Tokio runtime) that outlive `asyncio.run`, and one
    of them can take the GIL while Python tears itself down, which aborts the process with `Fatal
    Python error: PyGILState_Release` and status 134 instead of ours (seen on `recall worker` after
    Ctrl-C). Everything `main` opened is closed by the time it returns, so all finalization would
    still do is flush stdio, done here.

    Every way out ends here, not only a returned status: a Ctrl-C that arrives after the event loop
    closed (its signal handler is gone, so Python raises `KeyboardInterrupt` wherever the main
    thread is) means 130, a `SystemExit` its code, and a bug is printed and means 1. From the
    `finally` on, SIGINT is ignored: nothing is left to interrupt, and it must not cut the exit short.
    """
    status = EXIT_INTERRUPTED  # what `status` is left at only if a Ctrl-C lands inside a handler below
    try:
        status = main()
    except KeyboardInterrupt:
        status = EXIT_INTERRUPTED
    except SystemExit as error:
        status = error.code if isinstance(error.code, int) else EXIT_FAILURE if error.code else 0
    except BaseException:
        traceback.print_exc()
        status = EXIT_FAILURE
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a reader that went away (`| head`) loses nothing we could save
                stream.flush()
        os._exit(status)
