"""Import the runs a pydantic-ai-harness `StepPersistence` wrote to SQLite, as conversations.

The harness keeps no conversation log: at every settled step it saves a *snapshot*, the run's whole
message history at that point, so consecutive snapshots repeat each other, and a run that continued
an earlier one (`message_history=`) repeats that run too. This module recovers each run's history
the way the harness's own `SnapshotHistorySource` does, and appends it to our store, where messages
are matched by content hash, so every message is stored once however many snapshots carried it:

1. Runs are read oldest first (`runs.started_at`). Only `complete` snapshots are read, as the
   harness's readers do by default: an `interrupted` one holds unsettled tool work.
2. A run's snapshots are folded in write order: the longest suffix of the history so far that
   equals a prefix of the next snapshot (by `content_hash`) is its overlap, and what follows is
   new. The later copy of an overlapping message is kept, since pydantic-ai stamps messages after
   the snapshot that first carried them.
3. Each run's history goes to the conversation named by the run's `conversation_id` with
   `base_length=0`, so the store keeps only what the conversation lacks: a run that continued the
   previous one extends it, and a run that started afresh under the same id branches from the
   start (the earlier history stays reachable through the record's `branches`).

The database is read directly with `sqlite3`, read-only, so pydantic-ai-harness is not a runtime
dependency. Re-importing is a no-op: each append carries the deterministic idempotency key
`harness-import/{database fingerprint}/{run id}/{messages}-{last message hash}`, so a run whose
history is unchanged is recognised, and a run that has since grown appends only its new messages.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import sqlite3
from collections.abc import Callable, Generator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from pydantic import ValidationError
from pydantic_ai.messages import ModelMessage

from .content import content_hash, load_message
from .errors import RecallError, UnknownConversation
from .store import AppendRequest, DeltaWriter
from .text._documents import SUMMARY_METADATA, SUMMARY_METADATA_KEY, SUMMARY_PREFIX

__all__ = ('HarnessImportError', 'HarnessImportSummary', 'HarnessRun', 'import_harness', 'read_harness_runs')


_MEDIA_URI_PREFIX = 'media+sha256://'
_EXTERNAL = '__harness_external_media__'
_EXTERNAL_TEXT = '__harness_external_text__'
_EXTERNAL_URI = '__harness_external_uri__'
_ESCAPED_KEYS = '__harness_external_escaped_keys__'
_MARKER_FORMAT = '__harness_external_marker_format__'
_URLSAFE = '__harness_external_urlsafe__'
_LITERAL = '__harness_external_literal__'
_MARKER_KEYS = frozenset({_EXTERNAL, _EXTERNAL_TEXT, _EXTERNAL_URI, _ESCAPED_KEYS, _MARKER_FORMAT, _URLSAFE})

Progress = Callable[[int, int], None]


class HarnessImportError(RecallError):
    """The file is not a pydantic-ai-harness step database this importer can read."""


@dataclass(frozen=True, kw_only=True)
class HarnessRun:
    """One harness run and the history recovered from its complete snapshots."""

    run_id: str
    conversation_id: str
    agent_name: str | None
    parent_run_id: str | None
    snapshots: int
    """Complete snapshots read."""
    snapshot_messages: int
    """Messages across those snapshots, repeats included."""
    messages: list[ModelMessage]
    """The recovered history, each message once, in order."""
    hashes: list[str]
    skipped_snapshots: int = 0
    """Snapshots that could not be read (missing stored messages or media, or invalid JSON)."""


@dataclass(kw_only=True)
class HarnessImportSummary:
    """What an import read and what it changed."""

    fingerprint: str
    runs: int = 0
    """Runs in the database."""
    empty_runs: int = 0
    """Runs without a complete snapshot (for example, one that failed mid tool call): nothing to import."""
    snapshots: int = 0
    skipped_snapshots: int = 0
    snapshot_messages: int = 0
    """Messages across every snapshot read, repeats included."""
    recovered_messages: int = 0
    """Messages in the recovered run histories (a continued run repeats the runs before it)."""
    stored: int = 0
    """New entries this import stored."""
    duplicates: int = 0
    """Snapshot messages of the imported runs not stored, because an equal one (by content hash) was
    stored from another snapshot or run, or already had been."""
    conversations: list[str] = field(default_factory=list[str])
    """Conversations the import wrote to (or would have, had they not held every message already)."""
    conflicts: list[str] = field(default_factory=list[str])
    """Conversations left alone because the store holds them under another scope."""

    def describe(self) -> str:
        text = (
            f'read {self.runs} runs ({self.empty_runs} without a complete snapshot) from {self.snapshots} snapshots '
            f'into {len(self.conversations)} conversations: {self.snapshot_messages} snapshot messages, '
            f'{self.recovered_messages} in run histories, {self.stored} stored, {self.duplicates} duplicates dropped'
        )
        if self.stored == 0 and self.snapshot_messages:
            text += ' (all duplicates: the store already held every message)'
        if self.skipped_snapshots:
            text += f'; {self.skipped_snapshots} unreadable snapshots skipped'
        if self.conflicts:
            text += f'; left alone, stored under another scope: {", ".join(self.conflicts)}'
        return text


# --- reading the harness database -------------------------------------------------------------------


@contextmanager
def _connect(path: Path) -> Generator[sqlite3.Connection]:
    if not path.is_file():
        raise HarnessImportError(f'{path} does not exist or is not a file; pass the SQLite file SqliteStepStore wrote.')
    try:
        # Read-only and immutable-free: the harness may still be writing, and WAL readers see a consistent snapshot.
        connection = sqlite3.connect(f'{path.resolve().as_uri()}?mode=ro', uri=True, check_same_thread=False)
    except sqlite3.Error as error:
        raise HarnessImportError(f'{path} cannot be opened as a SQLite database ({error}).') from error
    try:
        yield connection
    finally:
        connection.close()


def _tables(connection: sqlite3.Connection, path: Path) -> set[str]:
    try:
        return {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as error:
        raise HarnessImportError(f'{path} is not a SQLite database ({error}).') from error


def _columns(connection: sqlite3.Connection, table: str) -> set[str]:
    # PRAGMA arguments cannot be bound; `table` is one of our own literals.
    return {row[1] for row in connection.execute(f'PRAGMA table_info({table})')}


class _HarnessDatabase:
    """Synchronous reads of one harness file; called through `asyncio.to_thread`."""

    def __init__(self, connection: sqlite3.Connection, path: Path) -> None:
        self._connection = connection
        tables = _tables(connection, path)
        missing = {'runs', 'snapshots'} - tables
        if missing:
            raise HarnessImportError(
                f'{path} has no {" or ".join(sorted(missing))} table, so it is not a pydantic-ai-harness '
                'step database (SqliteStepStore). Pass the file given to SqliteStepStore(database=...).'
            )
        self._has_refs = {'snapshot_messages', 'snapshot_message_refs'} <= tables
        self._has_media = 'media' in tables
        self._has_state = 'state' in _columns(connection, 'snapshots')

    def runs(self) -> list[tuple[str, str | None, str | None, str | None, str]]:
        return self._connection.execute(
            'SELECT run_id, conversation_id, parent_run_id, agent_name, started_at FROM runs ORDER BY started_at, rowid'
        ).fetchall()

    def snapshots(self, run_id: str) -> list[tuple[int, str]]:
        """`(seq, messages column)` of the run's complete snapshots, in write order."""
        if self._has_state:
            sql = "SELECT seq, messages FROM snapshots WHERE run_id = ? AND state = 'complete' ORDER BY seq"
        else:  # written before snapshots had a state: every one of them was complete
            sql = 'SELECT seq, messages FROM snapshots WHERE run_id = ? ORDER BY seq'
        return self._connection.execute(sql, (run_id,)).fetchall()

    def referenced(self, seq: int) -> list[str | None]:
        if not self._has_refs:
            return []
        return [
            row[0]
            for row in self._connection.execute(
                'SELECT m.message FROM snapshot_message_refs r LEFT JOIN snapshot_messages m ON m.sha256 = r.sha256 '
                'WHERE r.snapshot_seq = ? ORDER BY r.position',
                (seq,),
            )
        ]

    def media(self, digest: str) -> bytes | None:
        if not self._has_media:
            return None
        row = self._connection.execute('SELECT bytes FROM media WHERE sha256 = ?', (digest,)).fetchone()
        return None if row is None else bytes(row[0])


class _Unreadable(Exception):
    """A snapshot that cannot be rebuilt; it is skipped, as the harness's own reader skips it."""


def _snapshot_json(db: _HarnessDatabase, seq: int, column: str) -> list[Any]:
    """The snapshot's history as JSON values, whether stored inline or by reference."""
    try:
        value = json.loads(column)
    except json.JSONDecodeError as error:
        raise _Unreadable(f'snapshot {seq}: messages column is not JSON') from error
    if isinstance(value, list):
        return cast(list[Any], value)
    if not isinstance(value, dict) or not isinstance(value.get('stored_messages'), int):
        raise _Unreadable(f'snapshot {seq}: unknown messages format')
    expected: int = value['stored_messages']
    texts = db.referenced(seq)
    if len(texts) != expected or any(text is None for text in texts):
        raise _Unreadable(f'snapshot {seq}: {expected} stored messages referenced, {len(texts)} found')
    return [json.loads(text) for text in texts if text is not None]


def _restore(node: Any, db: _HarnessDatabase) -> Any:
    """Re-inline what the harness moved to its `media` table (large text and binary content)."""
    if isinstance(node, list):
        return [_restore(item, db) for item in cast(list[Any], node)]
    if not isinstance(node, dict):
        return node
    data = cast(dict[str, Any], node)
    if set(data) == {_LITERAL, _MARKER_FORMAT} and isinstance(data[_LITERAL], dict):
        # A caller dict that happened to carry a marker key, wrapped so it is not mistaken for a marker.
        return {key: _restore(value, db) for key, value in cast(dict[str, Any], data[_LITERAL]).items()}
    if data.get(_EXTERNAL) is not True:
        return {key: _restore(value, db) for key, value in data.items()}
    return _restore_marker(data, db)


def _restore_marker(marker: dict[str, Any], db: _HarnessDatabase) -> dict[str, Any]:
    uri = marker.get(_EXTERNAL_URI, marker.get('uri'))
    if not isinstance(uri, str) or not uri.startswith(_MEDIA_URI_PREFIX):
        raise _Unreadable(f'externalized content without a media URI: {uri!r}')
    raw = db.media(uri[len(_MEDIA_URI_PREFIX) :])
    if raw is None:
        raise _Unreadable(f'externalized content {uri} is missing from the media table')
    dropped = {_EXTERNAL, _EXTERNAL_TEXT, _URLSAFE, _EXTERNAL_URI}
    if _EXTERNAL_URI in marker and marker.get('uri') == marker[_EXTERNAL_URI]:
        dropped.add('uri')  # the mirror the harness writes for older readers, not the part's own field
    elif _EXTERNAL_URI not in marker:
        dropped.add('uri')
    escaped = marker.get(_ESCAPED_KEYS)
    restore_escaped = (
        isinstance(escaped, dict)
        and bool(escaped)
        and set(cast(dict[str, Any], escaped)) <= _MARKER_KEYS
        and isinstance(marker.get(_MARKER_FORMAT), str)
        and str(marker[_MARKER_FORMAT]).startswith('escaped-keys-v')
    )
    if restore_escaped:
        dropped |= {_ESCAPED_KEYS, _MARKER_FORMAT}
    restored = {key: _restore(value, db) for key, value in marker.items() if key not in dropped}
    if restore_escaped:
        restored.update({key: _restore(value, db) for key, value in cast(dict[str, Any], escaped).items()})
    if marker.get(_EXTERNAL_TEXT) is True:
        restored['content'] = raw.decode('utf-8', errors='surrogatepass')
    else:
        altchars = b'-_' if marker.get(_URLSAFE) == 'base64-urlsafe-v1' else None
        restored['data'] = base64.b64encode(raw, altchars=altchars).decode('ascii')
    return restored


def _is_summary_part(part: Any) -> bool:
    if not isinstance(part, dict):
        return False
    data = cast(dict[str, Any], part)
    if data.get('part_kind') == 'system-prompt':
        return data.get('dynamic_ref') is None and str(data.get('content', '')).startswith(SUMMARY_PREFIX)
    if data.get('part_kind') == 'user-prompt' and isinstance(data.get('content'), list):
        items = cast(list[Any], data['content'])
        return any(
            isinstance(item, dict) and cast(dict[str, Any], item).get('metadata') == SUMMARY_METADATA for item in items
        )
    metadata = data.get('metadata')
    return (
        data.get('part_kind') == 'compaction'
        and isinstance(metadata, dict)
        and cast(dict[str, Any], metadata).get(SUMMARY_METADATA_KEY) is True
        and data.get('provider_name') is None
        and data.get('id') is None
        and data.get('provider_details') is None
        and bool(data.get('content'))
    )


def _without_summaries(messages: list[Any]) -> list[Any]:
    """Drop compaction summaries: derived text, not something said (the originals are in earlier snapshots)."""
    out: list[Any] = []
    for message in messages:
        if isinstance(message, dict) and message.get('kind') == 'request':
            parts = cast(list[Any], message.get('parts') or [])
            kept = [part for part in parts if not _is_summary_part(part)]
            if len(kept) != len(parts):
                if not kept:
                    continue
                message = {**message, 'parts': kept}
        out.append(message)
    return out


def _overlap(history: Sequence[str], snapshot: Sequence[str]) -> int:
    """Length of the longest suffix of `history` equal to a prefix of `snapshot`."""
    for length in range(min(len(history), len(snapshot)), 0, -1):
        if list(history[-length:]) == list(snapshot[:length]):
            return length
    return 0


def _read_run(db: _HarnessDatabase, row: tuple[str, str | None, str | None, str | None, str]) -> HarnessRun:
    run_id, conversation_id, parent_run_id, agent_name, _started = row
    history: list[ModelMessage] = []
    hashes: list[str] = []
    snapshots = skipped = snapshot_messages = 0
    for seq, column in db.snapshots(run_id):
        try:
            values = _without_summaries(_restore(_snapshot_json(db, seq, column), db))
            messages = [load_message(json.dumps(value)) for value in values]
        except (_Unreadable, ValidationError, json.JSONDecodeError, UnicodeDecodeError, ValueError):
            skipped += 1
            continue
        snapshots += 1
        snapshot_messages += len(messages)
        snapshot_hashes = [content_hash(message) for message in messages]
        overlap = _overlap(hashes, snapshot_hashes)
        history[len(history) - overlap :] = messages[:overlap]
        history.extend(messages[overlap:])
        hashes.extend(snapshot_hashes[overlap:])
    return HarnessRun(
        run_id=run_id,
        conversation_id=conversation_id or run_id,
        agent_name=agent_name,
        parent_run_id=parent_run_id,
        snapshots=snapshots,
        snapshot_messages=snapshot_messages,
        messages=history,
        hashes=hashes,
        skipped_snapshots=skipped,
    )


def _fingerprint(runs: Sequence[tuple[str, str | None, str | None, str | None, str]]) -> str:
    """Names the database as it grows: its first run never changes, whatever is added later."""
    if not runs:
        return 'empty'
    first = runs[0]
    return hashlib.sha256(f'{first[0]}\x00{first[4]}'.encode()).hexdigest()[:16]


def _read_all(path: Path) -> tuple[str, list[HarnessRun]]:
    with _connect(path) as connection, _readable(path):
        db = _HarnessDatabase(connection, path)
        rows = db.runs()
        return _fingerprint(rows), [_read_run(db, row) for row in rows]


@contextmanager
def _readable(path: Path) -> Generator[None]:
    """Reports a harness file SQLite cannot read as `HarnessImportError`."""
    try:
        yield
    except sqlite3.DatabaseError as error:
        raise HarnessImportError(f'{path} could not be read as a harness step database ({error}).') from error


async def read_harness_runs(path: str | os.PathLike[str]) -> tuple[str, list[HarnessRun]]:
    """`(fingerprint, runs)`: every run of a harness database with its recovered history, oldest first.

    Holds every run's history at once; `import_harness` reads one run at a time instead.

    Raises:
        HarnessImportError: The file is missing, is not SQLite, or has no harness tables.
    """
    return await asyncio.to_thread(_read_all, Path(path))


# --- writing to our store ---------------------------------------------------------------------------


def idempotency_key(fingerprint: str, run: HarnessRun) -> str:
    """Deterministic per run and per recovered history, so an unchanged run is recognised on re-import."""
    last = run.hashes[-1][:16] if run.hashes else '-'
    return f'harness-import/{fingerprint}/{run.run_id}/{len(run.messages)}-{last}'


async def import_harness(
    store: DeltaWriter,
    path: str | os.PathLike[str],
    *,
    scope: str | None = None,
    progress: Progress | None = None,
) -> HarnessImportSummary:
    """Append every run of the harness database at `path` to `store`, each message once.

    Args:
        store: Where to write (any `DeltaWriter`, such as `SqliteConversationStore`).
        path: The SQLite file pydantic-ai-harness's `SqliteStepStore` wrote. Opened read-only.
        scope: The tenant scope of the conversations created. A conversation the store already
            holds under another scope is left alone and reported in `conflicts`.
        progress: Called as `progress(runs done, runs total)`.

    Raises:
        HarnessImportError: The file is missing, is not SQLite, or has no harness tables.
    """
    file = Path(path)
    with _connect(file) as connection:
        with _readable(file):
            db = await asyncio.to_thread(_HarnessDatabase, connection, file)
            rows = await asyncio.to_thread(db.runs)
        summary = HarnessImportSummary(fingerprint=_fingerprint(rows), runs=len(rows))
        if progress is not None:
            progress(0, len(rows))
        for done, row in enumerate(rows, 1):
            # One run's history in memory at a time, however large the harness file is.
            with _readable(file):
                run = await asyncio.to_thread(_read_run, db, row)
            await _import_run(store, run, summary, scope)
            if progress is not None:
                progress(done, len(rows))
    return summary


async def _import_run(store: DeltaWriter, run: HarnessRun, summary: HarnessImportSummary, scope: str | None) -> None:
    """Append one run's recovered history to its conversation, counting what happened in `summary`."""
    summary.snapshots += run.snapshots
    summary.skipped_snapshots += run.skipped_snapshots
    summary.snapshot_messages += run.snapshot_messages
    summary.recovered_messages += len(run.messages)
    if not run.messages:
        summary.empty_runs += 1
        return
    if run.conversation_id in summary.conflicts:
        return
    try:
        result = await store.append(
            AppendRequest(
                conversation_id=run.conversation_id,
                scope=scope,
                idempotency_key=idempotency_key(summary.fingerprint, run),
                base_length=0,
                base_hash=None,
                messages=run.messages,
            )
        )
    except UnknownConversation:
        summary.conflicts.append(run.conversation_id)
        return
    summary.stored += result.stored
    summary.duplicates += run.snapshot_messages - result.stored
    if run.conversation_id not in summary.conversations:
        summary.conversations.append(run.conversation_id)
