"""Build `harness_steps.db` and `harness_expected.json`: a real pydantic-ai-harness step database.

`recall import-harness` reads the harness's SQLite files directly, without depending on
pydantic-ai-harness. This script is how we know what such a file really looks like, and what the
harness itself makes of it: it runs real agents (pydantic-ai's `FunctionModel`, no network) with
`StepPersistence` on a `SqliteStepStore`, then asks the harness's own `SnapshotHistorySource` for
every run's recovered history and writes the distinct messages it found.

It runs in a separate environment, because the harness pins an older pydantic-ai than ours::

    python3 -m venv /tmp/harness-venv
    /tmp/harness-venv/bin/pip install pydantic-ai-harness==0.62.0
    /tmp/harness-venv/bin/python tests/data/make_harness_db.py

What the database holds, chosen so the importer meets every shape of snapshot it must handle:

- `support-1`: three runs, each continuing the previous run's history (`message_history`), with
  tool calls, so every run's snapshots repeat the runs before it.
- `support-2`: a run with two tool calls in one response, then a run continuing from the first
  run's latest snapshot with `continue_run` (a second turn), then a fork of that first run under a
  new conversation id (`support-2-fork`).
- `billing-3`: a run with no tool call (its only snapshot is the `after_run` fallback) and a run
  whose tool returns a text large enough to be externalized into the `media` table.
- `orders-4`: a run whose tool fails hard, which leaves an `interrupted` snapshot the harness
  itself does not read by default, plus a delegate run (another agent called from a tool, with a
  `parent_run_id`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_harness.conversation_search import SnapshotHistorySource
from pydantic_ai_harness.step_persistence import SqliteStepStore, StepPersistence, continue_run

HERE = Path(__file__).resolve().parent
DATABASE = HERE / 'harness_steps.db'
EXPECTED = HERE / 'harness_expected.json'
MEDIA_THRESHOLD_BYTES = 1024
"""Low, so one tool return in this small file goes through the harness's media externalization."""


def _last_prompt(messages: list[ModelMessage]) -> str:
    for message in reversed(messages):
        for part in message.parts:
            if part.part_kind == 'user-prompt' and isinstance(part.content, str):
                return part.content
    return ''


def _responses_since_prompt(messages: list[ModelMessage]) -> int:
    count = 0
    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            count += 1
        elif any(part.part_kind == 'user-prompt' for part in message.parts):
            break
    return count


def _tool_returns(messages: list[ModelMessage]) -> list[str]:
    last = messages[-1]
    return [str(part.content) for part in last.parts if part.part_kind == 'tool-return']


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A scripted support model: calls the tool a prompt asks for, then answers from its result."""
    prompt = _last_prompt(messages)
    step = _responses_since_prompt(messages)
    if step == 0:
        if 'order' in prompt.lower() and 'and' in prompt.lower():
            return ModelResponse(
                parts=[
                    ToolCallPart('lookup_order', {'order_id': 'A-1042'}, tool_call_id='call-a'),
                    ToolCallPart('lookup_order', {'order_id': 'B-2203'}, tool_call_id='call-b'),
                ]
            )
        if 'order' in prompt.lower():
            return ModelResponse(parts=[ToolCallPart('lookup_order', {'order_id': 'A-1042'}, tool_call_id='call-1')])
        if 'prefer' in prompt.lower():
            return ModelResponse(parts=[ToolCallPart('note_preference', {'text': prompt}, tool_call_id='call-note')])
        if 'invoice' in prompt.lower():
            return ModelResponse(
                parts=[ToolCallPart('invoice_pdf_text', {'invoice': 'INV-7731'}, tool_call_id='c-inv')]
            )
        if 'refund' in prompt.lower():
            return ModelResponse(parts=[ToolCallPart('issue_refund', {'order_id': 'A-1042'}, tool_call_id='c-refund')])
        if 'warehouse' in prompt.lower():
            return ModelResponse(parts=[ToolCallPart('ask_warehouse', {'question': prompt}, tool_call_id='c-wh')])
        return ModelResponse(parts=[TextPart(f'Noted: {prompt}')])
    returns = _tool_returns(messages)
    summary = '; '.join(text[:80] for text in returns)
    return ModelResponse(parts=[TextPart(f'Here is what I found: {summary}')])


def warehouse_respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart('Warehouse Leith says pallet 7 holds order A-1042, dispatch at 16:00.')])


def _remove_old_database() -> None:
    for path in (DATABASE, Path(f'{DATABASE}-wal'), Path(f'{DATABASE}-shm')):
        path.unlink(missing_ok=True)


async def main() -> None:
    _remove_old_database()
    store = SqliteStepStore(database=DATABASE, media_threshold_bytes=MEDIA_THRESHOLD_BYTES)

    warehouse = Agent(
        FunctionModel(warehouse_respond, model_name='warehouse'),
        name='warehouse',
        capabilities=[StepPersistence(store=store, agent_name='warehouse')],
    )
    agent = Agent(
        FunctionModel(respond, model_name='scripted-support'),
        name='support',
        instructions='You are the support agent of Harbour Parcels.',
        capabilities=[StepPersistence(store=store, agent_name='support')],
    )

    @agent.tool_plain
    def lookup_order(order_id: str) -> str:
        """Where an order is."""
        places = {'A-1042': 'in transit to 12 Harbour Street, Leith', 'B-2203': 'waiting at the Glasgow depot'}
        return f'Order {order_id} is {places.get(order_id, "unknown")}.'

    @agent.tool_plain
    def note_preference(text: str) -> dict[str, str]:
        """Record a delivery preference."""
        return {'status': 'saved', 'preference': text}

    @agent.tool_plain
    def invoice_pdf_text(invoice: str) -> str:
        """The text of an invoice: long, so the harness stores it outside the snapshot."""
        lines = [f'{invoice} line {n}: parcel handling fee, Leith depot, 4.20 GBP' for n in range(60)]
        return '\n'.join(lines)

    @agent.tool_plain
    def issue_refund(order_id: str) -> str:
        """Fails hard: the payment provider is down."""
        raise RuntimeError(f'payment provider unreachable while refunding {order_id}')

    @agent.tool_plain
    async def ask_warehouse(question: str) -> str:
        """Delegate to the warehouse agent."""
        result = await warehouse.run(question)
        return result.output

    # support-1: three runs, each continuing the last.
    first = await agent.run('Where is my order A-1042?', conversation_id='support-1')
    second = await agent.run(
        'I prefer deliveries after 5pm.', message_history=first.all_messages(), conversation_id='support-1'
    )
    await agent.run('Thanks, that is all.', message_history=second.all_messages(), conversation_id='support-1')

    # support-2: parallel tool calls, a continuation from the stored snapshot, and a fork.
    parallel = await agent.run('Check order A-1042 and order B-2203 please.', conversation_id='support-2')
    runs = await store.list_runs(conversation_id='support-2')
    history = await continue_run(store, run_id=runs[-1].run_id)
    await agent.run('Which one arrives first?', message_history=history, conversation_id='support-2')
    await agent.run(
        'Actually, cancel B-2203.', message_history=parallel.all_messages(), conversation_id='support-2-fork'
    )

    # billing-3: a run without tools, and one with an externalized tool return.
    await agent.run('Hello, I have a billing question.', conversation_id='billing-3')
    await agent.run('Show me invoice INV-7731.', conversation_id='billing-3')

    # orders-4: a failing tool (an interrupted snapshot) and a delegate run.
    with contextlib.suppress(RuntimeError):
        await agent.run('I want a refund for A-1042.', conversation_id='orders-4')
    await agent.run('Ask the warehouse where A-1042 is.', conversation_id='orders-4')

    source = SnapshotHistorySource(store)
    expected_runs: list[dict[str, object]] = []
    distinct: dict[str, object] = {}
    for run in await source.list_runs():
        messages = await source.run_history(run_id=run.run_id)
        dumped = json.loads(ModelMessagesTypeAdapter.dump_json(messages))
        expected_runs.append(
            {
                'run_id': run.run_id,
                'conversation_id': run.conversation_id,
                'parent_run_id': run.parent_run_id,
                'agent_name': run.agent_name,
                'messages': len(messages),
            }
        )
        for message in dumped:
            # A stand-in for the content hash until the test loads it with the current pydantic-ai.
            key = json.dumps(_without_stamps(message), sort_keys=True)
            distinct.setdefault(key, message)
    EXPECTED.write_text(
        json.dumps(
            {
                'generated_by': 'tests/data/make_harness_db.py with pydantic-ai-harness 0.62.0',
                'runs': expected_runs,
                'distinct_messages': list(distinct.values()),
            },
            indent=1,
            ensure_ascii=False,
        )
        + '\n',
        encoding='utf-8',
    )
    # Fold the WAL into the main file so the shipped database is one self-contained file.
    import sqlite3

    connection = sqlite3.connect(DATABASE)
    try:
        connection.execute('PRAGMA wal_checkpoint(TRUNCATE)')
        connection.execute('PRAGMA journal_mode=DELETE')
        connection.execute('VACUUM')
    finally:
        connection.close()
    print(f'wrote {DATABASE} ({DATABASE.stat().st_size} bytes) and {EXPECTED}', file=sys.stderr)


def _without_stamps(message: dict[str, object]) -> dict[str, object]:
    """Drop the fields pydantic-ai stamps after the fact, so re-stamped copies count once."""
    data = {key: value for key, value in message.items() if key not in ('timestamp', 'run_id', 'conversation_id')}
    if data.get('kind') == 'request':
        data.pop('instructions', None)
    parts = data.get('parts')
    if isinstance(parts, list):
        data['parts'] = [
            {key: value for key, value in part.items() if key != 'timestamp'}
            for part in parts
            if isinstance(part, dict) and part.get('part_kind') not in ('instruction-delta', 'instruction-baseline')
        ]
    return data


if __name__ == '__main__':
    asyncio.run(main())
