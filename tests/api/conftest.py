"""A store with conversations in two tenant scopes (and one without a scope), served over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from temporal_recall.api import create_app
from temporal_recall.store import open_store

from ._http import Client, serving

ACME = 'acme-token-0123456789abcdef'
GLOBEX = 'globex-token-0123456789abcdef'
TOKENS = {ACME: 'acme', GLOBEX: 'globex'}

ACME_CONVERSATIONS = ('support-42', 'acme-billing')
GLOBEX_CONVERSATIONS = ('globex-7',)
UNSCOPED_CONVERSATIONS = ('public-1',)


def _support(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1]
    if any(part.part_kind == 'tool-return' for part in last.parts):
        return ModelResponse(parts=[TextPart('Order A-1042 leaves the Leith depot at 16:00 for 12 Harbour Street.')])
    prompt = next(str(part.content) for part in last.parts if part.part_kind == 'user-prompt')
    if 'order' in prompt.lower():
        return ModelResponse(parts=[ToolCallPart('lookup_order', {'order_id': 'A-1042'}, tool_call_id='call-1')])
    return ModelResponse(parts=[TextPart(f'Noted: {prompt}')])


def _agent() -> Agent[None, str]:
    agent = Agent(FunctionModel(_support, model_name='scripted'))

    @agent.tool_plain
    def lookup_order(order_id: str) -> str:
        return f'Order {order_id} is at the Leith depot.'

    return agent


async def fill_store(path: Path) -> dict[str, str]:
    """Write the test conversations; returns the agent run id of each conversation's first run."""
    store = await open_store(path)
    agent = _agent()
    run_ids: dict[str, str] = {}
    try:
        prompts = {
            'public-1': ('Public question about order A-1042', None),
            'globex-7': ('Globex order A-1042 needs a refund, invoice INV-9', 'globex'),
            'acme-billing': ('Please send invoice INV-7731 again', 'acme'),
            'support-42': ('Where is order A-1042?', 'acme'),
        }
        for conversation_id, (prompt, scope) in prompts.items():
            result = await agent.run(prompt, conversation_id=conversation_id)
            run_ids[conversation_id] = result.run_id
            await store.save(result, scope=scope)
        conversation = await store.load('support-42')
        await store.update('support-42', title='Order A-1042', expected_title=None)  # kept by the save below
        follow_up = await agent.run('Thanks! Deliver after 5pm please.', conversation=conversation)
        await store.save(follow_up)
    finally:
        await store.close()
    return run_ids


@pytest.fixture(scope='module')
async def api_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    path = tmp_path_factory.mktemp('api') / 'recall.db'
    return path, await fill_store(path)


@pytest.fixture(scope='module')
def api(api_store: tuple[Path, dict[str, str]]) -> Iterator[Client]:
    with serving(create_app(api_store[0], tokens=TOKENS)) as client:
        yield client
