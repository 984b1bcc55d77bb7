"""How many bytes a stored message costs, persisted after every step as the persistence capability does.

Builds one 1,000-message conversation step by step, writing after every step (by default through
`append`, the `DeltaWriter` path the capability uses; `--mode save` uses `ConversationStore.save`
instead), then checkpoints the WAL, vacuums, and reports bytes on disk per message, the number of
stored entries (which must equal the number of messages: each is stored once, however often it was
re-sent), and how much of the file the search index takes.

    .venv/bin/python scripts/storage_per_message.py [--messages 1000] [--mode append|save] [--keep PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path

from pydantic_ai import messages as m
from pydantic_ai.conversation import Conversation
from pydantic_ai.usage import RequestUsage, RunUsage

from temporal_recall.content import content_hash, dump_message
from temporal_recall.store import AppendRequest, SqliteConversationStore

WORDS = [
    'the',
    'invoice',
    'order',
    'customer',
    'shipping',
    'delivery',
    'payment',
    'refund',
    'account',
    'balance',
    'report',
    'weather',
    'forecast',
    'meeting',
    'schedule',
    'project',
    'budget',
    'deadline',
    'review',
    'design',
    'database',
    'server',
    'latency',
    'error',
    'retry',
    'timeout',
    'deploy',
    'release',
    'version',
    'feature',
    'request',
    'ticket',
    'priority',
    'summary',
    'analysis',
    'result',
    'question',
    'answer',
    'because',
    'however',
    'therefore',
    'would',
    'could',
    'should',
    'please',
    'thanks',
    'great',
    'okay',
    'sure',
    'next',
    'week',
    'monday',
    'friday',
    'morning',
    'evening',
    'team',
    'manager',
    'engineer',
    'support',
    'contract',
    'renewal',
    'discount',
    'quarter',
    'revenue',
    'growth',
    'plan',
]

INDEX_TABLES = {'documents', 'terms', 'posting_blocks', 'term_documents', 'conversation_documents', 'tenants', 'runs'}
LOG_TABLES = {'entries', 'conversations', 'conversation_branches', 'applied_writes'}


def sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(8, 16))]
    if rng.random() < 0.3:
        words.insert(rng.randrange(len(words)), f'INV-{rng.randint(1000, 9999)}')
    return ' '.join(words).capitalize() + '.'


def text(rng: random.Random) -> str:
    """A few hundred bytes of prose-like text."""
    return ' '.join(sentence(rng) for _ in range(rng.randint(3, 6)))


def message(step: int, rng: random.Random) -> m.ModelMessage:
    """Steps cycle user prompt → tool call → tool return → assistant reply, like an agent run."""
    kind = step % 4
    if kind == 0:
        return m.ModelRequest(parts=[m.UserPromptPart(text(rng))], run_id=f'run-{step // 4}')
    if kind == 1:
        args = {'query': sentence(rng), 'limit': rng.randint(1, 20)}
        return m.ModelResponse(
            parts=[m.ToolCallPart('search_orders', args, tool_call_id=f'call-{step}')],
            usage=RequestUsage(input_tokens=rng.randint(200, 900), output_tokens=rng.randint(10, 60)),
            model_name='example-model',
            run_id=f'run-{step // 4}',
        )
    if kind == 2:
        rows = [{'id': f'INV-{rng.randint(1000, 9999)}', 'note': sentence(rng)} for _ in range(rng.randint(1, 3))]
        return m.ModelRequest(
            parts=[m.ToolReturnPart('search_orders', rows, tool_call_id=f'call-{step - 1}')], run_id=f'run-{step // 4}'
        )
    return m.ModelResponse(
        parts=[m.TextPart(text(rng))],
        usage=RequestUsage(input_tokens=rng.randint(200, 900), output_tokens=rng.randint(50, 200)),
        model_name='example-model',
        run_id=f'run-{step // 4}',
    )


async def fill(path: Path, count: int, mode: str) -> int:
    """Write `count` messages one step at a time; returns the bytes of their JSON."""
    rng = random.Random(42)
    history: list[m.ModelMessage] = []
    conversation = Conversation(conversation_id='bench')
    json_bytes = 0
    async with await SqliteConversationStore.open(path) as store:
        for step in range(count):
            new = message(step, rng)
            json_bytes += len(dump_message(new).encode())
            if mode == 'append':
                await store.append(
                    AppendRequest(
                        conversation_id='bench',
                        scope='user-1',
                        idempotency_key=f'wf-bench/run-{step // 4}/step-{step}',
                        base_length=len(history),
                        base_hash=content_hash(history[-1]) if history else None,
                        messages=[new],
                        run_id=f'run-{step // 4}',
                        usage=RunUsage(requests=1) if isinstance(new, m.ModelResponse) else None,
                    )
                )
                history.append(new)
            else:
                conversation.messages.append(new)
                await store.save(conversation, scope='user-1')
        loaded = await store.load('bench')
        assert loaded is not None and len(loaded.messages) == count
    return json_bytes


def measure(path: Path) -> dict[str, int]:
    """Bytes per table (indexes counted with their table) after a checkpoint and VACUUM."""
    with closing(sqlite3.connect(path)) as db:
        db.execute('PRAGMA wal_checkpoint(TRUNCATE)')
        db.execute('VACUUM')
        owner = {name: table for name, table in db.execute('SELECT name, tbl_name FROM sqlite_master')}
        sizes: dict[str, int] = {}
        for name, size in db.execute('SELECT name, sum(pgsize) FROM dbstat GROUP BY name'):
            table = owner.get(name, name)
            sizes[table] = sizes.get(table, 0) + size
        sizes['<entries>'] = db.execute('SELECT count(*) FROM entries').fetchone()[0]
        sizes['<postings>'] = db.execute('SELECT coalesce(sum(count), 0) FROM posting_blocks').fetchone()[0]
        sizes['<documents>'] = db.execute('SELECT count(*) FROM documents').fetchone()[0]
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or '').splitlines()[0])
    parser.add_argument('--messages', type=int, default=1000)
    parser.add_argument('--mode', choices=('append', 'save'), default='append')
    parser.add_argument('--keep', type=Path, help='write the database here instead of a temporary directory')
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = args.keep or Path(folder) / 'storage.db'
        json_bytes = asyncio.run(fill(path, args.messages, args.mode))
        sizes = measure(path)
        file_bytes = path.stat().st_size
    count = args.messages
    entries = sizes.pop('<entries>')
    postings = sizes.pop('<postings>')
    documents = sizes.pop('<documents>')
    index = sum(size for table, size in sizes.items() if table in INDEX_TABLES)
    log = sum(size for table, size in sizes.items() if table in LOG_TABLES)
    print(f'mode: {args.mode}, one conversation written after every step')
    print(f'messages: {count}, stored entries: {entries} ({"stored once" if entries == count else "MISMATCH"})')
    print(f'documents: {documents}, postings: {postings} ({postings / max(documents, 1):.1f} per document)')
    print(f'message JSON: {json_bytes / count:.0f} bytes per message on average')
    print(f'database file after checkpoint + VACUUM: {file_bytes} bytes = {file_bytes / count:.0f} bytes per message')
    print(f'  log (entries, conversation, idempotency keys): {log / count:.0f} bytes per message')
    print(f'  search index: {index / count:.0f} bytes per message ({100 * index / file_bytes:.0f}% of the file)')
    for table, size in sorted(sizes.items(), key=lambda item: -item[1]):
        print(f'    {table:28} {size:>9} bytes  {size / count:>7.0f} per message')
    if entries != count:
        raise SystemExit('every message must be stored exactly once')


if __name__ == '__main__':
    main()
