"""Run `recall` in-process (or as a process, for the smoke tests), and fill stores for it to read."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from temporal_recall.cli import run, run_async
from temporal_recall.store import AppendRequest, open_store

RECALL = [sys.executable, '-m', 'temporal_recall.cli']


@dataclass(frozen=True)
class Ran:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    def ndjson(self) -> list[Any]:
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]

    def __str__(self) -> str:
        return (
            f'recall {" ".join(self.args)} -> {self.returncode}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}'
        )


def clean_env(**extra: str) -> dict[str, str]:
    """The test's environment without temporal-recall's or Temporal's settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(('TEMPORAL_RECALL_', 'TEMPORAL_'))}
    env.update(extra)
    return env


@contextlib.contextmanager
def _as_a_user(cwd: Path | None, env: Mapping[str, str] | None) -> Iterator[tuple[io.StringIO, io.StringIO]]:
    """The process's environment, working directory, stdout and stderr, as a user's `recall` would have them."""
    saved_env, saved_cwd = dict(os.environ), Path.cwd()
    out, err = io.StringIO(), io.StringIO()
    os.environ.clear()
    os.environ.update(clean_env() if env is None else env)
    os.environ.setdefault('COLUMNS', '200')
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            yield out, err
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


def recall(*args: str | os.PathLike[str], cwd: Path | None = None, env: Mapping[str, str] | None = None) -> Ran:
    """`recall ARGS` in this process (`main` without the exit), as a user at a pipe would see it."""
    argv = tuple(str(arg) for arg in args)
    with _as_a_user(cwd, env) as (out, err):
        status = run(argv)
    return Ran(argv, status, out.getvalue(), err.getvalue())


async def recall_async(
    *args: str | os.PathLike[str], cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> Ran:
    """`recall` for async tests: in the running event loop, so the session's clients keep working."""
    argv = tuple(str(arg) for arg in args)
    with _as_a_user(cwd, env) as (out, err):
        status = await run_async(argv)
    return Ran(argv, status, out.getvalue(), err.getvalue())


def recall_many(commands: Sequence[Sequence[str | os.PathLike[str]]], **options: Any) -> list[Ran]:
    return [recall(*command, **options) for command in commands]


def recall_process(*args: str | os.PathLike[str], env: Mapping[str, str] | None = None, timeout: float = 60) -> Ran:
    """`recall` as a separate process: for what only a process shows (exit status, streams, signals)."""
    argv = tuple(str(arg) for arg in args)
    done = subprocess.run(
        [*RECALL, *argv],
        capture_output=True,
        text=True,
        env=dict(env) if env is not None else clean_env(),
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    return Ran(argv, done.returncode, done.stdout, done.stderr)


def _support(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1]
    if any(part.part_kind == 'tool-return' for part in last.parts):
        return ModelResponse(parts=[TextPart('Order A-1042 will be delivered to 12 Harbour Street, Leith.')])
    prompt = next(str(part.content) for part in last.parts if part.part_kind == 'user-prompt')
    if 'order' in prompt.lower():
        return ModelResponse(parts=[ToolCallPart('lookup_order', {'order_id': 'A-1042'}, tool_call_id='call-1')])
    return ModelResponse(parts=[TextPart(f'Noted: {prompt}')])


def support_agent() -> Agent[None, str]:
    agent = Agent(FunctionModel(_support, model_name='scripted'))

    @agent.tool_plain
    def lookup_order(order_id: str) -> str:
        return f'Order {order_id} left the Leith depot at 16:00.'

    return agent


@dataclass(frozen=True)
class Filled:
    path: Path
    run_ids: dict[str, str]


async def fill_store(path: Path) -> Filled:
    """Conversations in scope `acme`, one in `globex`, one without a scope, and one with a branch."""
    agent = support_agent()
    store = await open_store(path)
    run_ids: dict[str, str] = {}
    try:
        for conversation_id, prompt, scope in (
            ('unscoped-1', 'A question about order A-1042 without a tenant', None),
            ('globex-7', 'Globex wants a refund for invoice INV-9', 'globex'),
            ('acme-branchy', 'Please resend invoice INV-7731', 'acme'),
            ('support-42', 'Where is my order A-1042?', 'acme'),
        ):
            result = await agent.run(prompt, conversation_id=conversation_id)
            run_ids[conversation_id] = result.run_id
            await store.save(result, scope=scope)
        conversation = await store.load('support-42')
        # Titled before the later writes to both conversations: a save and an append keep a title.
        await store.update('support-42', title='Order A-1042 delivery', expected_title=None)
        await store.update('acme-branchy', title='Invoice resend', metadata={'channel': 'email'})
        follow_up = await agent.run('Thanks! I prefer deliveries after 5pm.', conversation=conversation)
        await store.save(follow_up)
        # Another run sent under the same conversation without its history: it branches from the start,
        # and the first run's messages are kept as a branch.
        rewritten = await agent.run('Actually, resend invoice INV-8800 instead', conversation_id='acme-branchy')
        await store.append(
            AppendRequest(
                conversation_id='acme-branchy',
                scope='acme',
                idempotency_key='rewrite-1',
                base_length=0,
                base_hash=None,
                messages=rewritten.all_messages(),
            )
        )
    finally:
        await store.close()
    return Filled(path=path, run_ids=run_ids)
