"""A rebuild's next batch analysed in a process of its own while this batch is written.
More in docs/design/store.md ("Bulk reindex").

Without it a rebuild's batch is Python's work (each stored message parsed with pydantic-ai's adapter
and its words analysed) and then the database's, one after the other, on one core. A thread cannot
overlap the two: the analysis holds the GIL (its regular expressions run in C without releasing
it), and measured, a thread gained nothing. A process can, on a second core: the messages go to it
as they are stored, and the documents come back laid out as arrays (`_bulk.Analysed`), which pickle
in milliseconds.

The process is `index._analyst`, started as `python -m` with this process's import path, and spoken
to over its standard input and output, one batch at a time. Not `multiprocessing`: its spawn runs
the parent's main script again in the child, and a user's script without a main guard that opens a
store (whose migration rebuilds the index) would run twice.

The process only computes: the result is what `index_documents` gives in this process, and every row
is written here, in the rebuild's transaction. When it fails (a message that does not parse, a
process that cannot start or dies), the batch is analysed here instead (`index_events`), where an
error raises as itself, and the process is not used again.

Used only by a rebuild of `PARALLEL_FROM` events or more: below that, starting the process (it
imports pydantic-ai) costs more than it saves.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import subprocess
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import IO, cast

from ..sql._session import Session
from ._bulk import Analysed, Event, analyse_messages, first_members, stored_messages

__all__ = ('ANALYST', 'PARALLEL_FROM', 'Analysis', 'analysis_or_none')

PARALLEL_FROM = 40_000
"""The fewest membership events a rebuild analyses ahead in another process for: two batches of
`_rebuild.BATCH`, so that there is a batch to write while the next is analysed."""

STOP_SECONDS = 5.0
"""How long the end of a rebuild waits for the process to finish before killing it."""

ANALYST = ('-m', 'temporal_recall.store.index._analyst')
"""The interpreter's arguments that start the process."""

_log = logging.getLogger('temporal_recall.store')


class Analysis:
    """Where a rebuild's batches are analysed: ahead, in the process (`ahead`, then `result`), or, for
    a small rebuild or once the process failed, by `index_events` as it indexes them (`result` is
    `None`). A context manager: leaving it ends the process."""

    def __init__(self, events: int) -> None:
        self._analyst: _Analyst | None = None
        if events >= PARALLEL_FROM:
            self._analyst = _Analyst.start()

    def __enter__(self) -> Analysis:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._stop(kill=error is not None)

    async def ahead(self, session: Session, events: Sequence[Event]) -> Future[Analysed | None] | None:
        """Read the messages that may create documents in `events` (each content's first event) and send
        them to the process; `None` when there is no process or nothing to analyse."""
        if self._analyst is None or not events:
            return None
        keys = dict.fromkeys(member.entry_key for member in first_members(events).values())
        return self._analyst.send(await stored_messages(session, list(keys)))

    async def result(self, session: Session, pending: Future[Analysed | None] | None) -> Analysed | None:
        """What `ahead` sent, analysed (`None` if it sent nothing or the process failed)."""
        if pending is None:
            return None
        try:
            analysed = await session.finished(pending)
        except (OSError, EOFError, pickle.PickleError) as error:
            _log.warning('The index analysis process failed (%r); this process analyses the rest.', error)
            self._stop(kill=True)
            return None
        return analysed

    def _stop(self, *, kill: bool) -> None:
        analyst, self._analyst = self._analyst, None
        if analyst is not None:
            analyst.stop(kill=kill)


class _Analyst:
    """The process (`index._analyst`) and the thread that talks to it: the batches' pipes are written and
    read there, so waiting for the process never blocks an event loop and its pickling overlaps too."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self._process = process
        self._talk = ThreadPoolExecutor(max_workers=1, thread_name_prefix='recall-index-analysis')

    @classmethod
    def start(cls) -> _Analyst | None:
        if not sys.executable:  # An embedded interpreter: no Python to start.
            return None
        environment = {**os.environ, 'PYTHONPATH': os.pathsep.join(path for path in sys.path if path)}
        try:
            process = subprocess.Popen(  # This interpreter, running this package's module.
                [sys.executable, *ANALYST],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=environment,
            )  # fmt: skip
        except OSError as error:
            _log.warning('The index analysis process did not start (%r); this process analyses every batch.', error)
            return None
        return cls(process)

    def send(self, messages: dict[int, str]) -> Future[Analysed | None]:
        return self._talk.submit(self._exchange, messages)

    def _exchange(self, messages: dict[int, str]) -> Analysed | None:
        into, out = cast(IO[bytes], self._process.stdin), cast(IO[bytes], self._process.stdout)
        pickle.dump(messages, into, protocol=pickle.HIGHEST_PROTOCOL)
        into.flush()
        return cast('Analysed | None', pickle.load(out))  # Our own child, over its private pipe.

    def stop(self, *, kill: bool) -> None:
        """End the process: at the end of its input, or at once with `kill` (a rebuild that failed may have
        left a batch being analysed, whose answer nobody reads)."""
        if kill:
            self._process.kill()
        if self._process.stdin is not None:
            with contextlib.suppress(OSError):  # A process that died: its pipe is broken.
                self._process.stdin.close()  # The process ends at the end of its input.
        try:
            self._process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._talk.shutdown(wait=True)  # An exchange under way ends with the process's pipes.
        if self._process.stdout is not None:
            self._process.stdout.close()


def analysis_or_none(messages: Mapping[int, str]) -> Analysed | None:
    """In the process: `analyse_messages`, or `None` if it failed (see the module notes)."""
    try:
        return analyse_messages(messages)
    except Exception:  # Reported by analysing the batch again in the rebuild's process.
        return None
