"""The model's recall tool searches the conversation as it stands: it offers no way to reach the branches it left."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from temporal_recall import ConversationRecall
from temporal_recall.store import open_store


async def test_the_tool_takes_no_branch_option(tmp_path: Path) -> None:
    offered: dict[str, dict[str, Any]] = {}

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.update({tool.name: tool.parameters_json_schema for tool in info.function_tools})
        return ModelResponse(parts=[TextPart('ok')])

    store = await open_store(tmp_path / 'recall.db')
    try:
        agent = Agent(FunctionModel(model), capabilities=[ConversationRecall(store=store)])
        await agent.run('hello', conversation_id='c')
    finally:
        await store.close()
    assert set(offered['search_conversation_history']['properties']) == {'query', 'run_id', 'role', 'mode'}
