"""Exit statuses of temporal-recall's processes (`recall` and the worker), written once for both."""

from __future__ import annotations

__all__ = ('EXIT_FAILURE', 'EXIT_INTERRUPTED', 'EXIT_USAGE')

EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
"""The shell's status for a process ended by SIGINT (128 + 2), which `recall` and the worker exit with."""
