"""The scripted agent that `scripts/bench_fleet.py` and `scripts/measure_step_cost.py` run: 4 model requests.

Each run makes three tool calls, then answers: 4 model requests, 8 messages. The model is a
`FunctionModel` that sleeps `latency` seconds per request (a provider's round trip without its
CPU) and answers by the script alone, so a retried request gets the same answer. The texts are a
few dozen words from a fixed vocabulary, about what a support agent's turns and tool results hold,
so the store indexes realistic postings.

Three agents of the worker's `TEMPORAL_RECALL_AGENTS`, identical but for `ConversationRecall` (with its
defaults, as an app adds it: its recall tool is offered to the model, which never calls it):

    TEMPORAL_RECALL_AGENTS=bench.fleet_agent:without_recall,bench.fleet_agent:with_recall,bench.fleet_agent:nothing_stored

`without_recall` has none, `with_recall` writes to the worker's store, and `nothing_stored` has the
capability over a store that keeps nothing (`NothingStored`): everything persistence costs except the
store's own work. That is the floor of what any store can reach: the capability's hooks, its wrapper
model, its content hashes and its tool, in the workflow and in the activities. Their names
(`WITHOUT`, `WITH`, `FLOOR`) are what `RunPromptInput.agent` selects.
"""

from __future__ import annotations

import asyncio
import hashlib
from datetime import timedelta
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.durable_exec.temporal import TemporalDurability
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from temporalio.workflow import ActivityConfig

from temporal_recall import ConversationRecall, RecallDeps
from temporal_recall.store import AppendRequest, AppendResult

__all__ = (
    'ACTIVITY_CONFIG',
    'FLOOR',
    'FLOOR_LABEL',
    'LATENCY',
    'MESSAGES_PER_RUN',
    'TOOL_CALLS',
    'WITH',
    'WITHOUT',
    'NothingStored',
    'build',
    'expected_kinds',
    'nothing_stored',
    'prompt_for',
    'with_recall',
    'without_recall',
)

LATENCY = 0.05
"""Seconds each model request of the worker's agents takes (the issue's 50 ms)."""
TOOL_CALLS = 3
MESSAGES_PER_RUN = 2 + 2 * TOOL_CALLS
"""The prompt, a call and its return per tool call, and the answer."""
WITHOUT, WITH, FLOOR = 'fleet_without', 'fleet_recalls', 'fleet_nostore'
"""Agent names, of equal length so the variants' activity payloads are the same size."""
FLOOR_LABEL = 'nothing stored'
"""How the benchmarks name the `FLOOR` agent's figures."""
ACTIVITY_CONFIG = ActivityConfig(start_to_close_timeout=timedelta(seconds=60), heartbeat_timeout=timedelta(seconds=10))
"""What the README tells users to give `TemporalDurability`: a killed worker's activities retried within about 12 s."""

_LINES = (
    'order parcel depot invoice refund courier address delivery window customer account ticket warehouse',
    'shipment tracking label return exchange payment card receipt status update carrier route driver',
    'morning evening weekend holiday schedule confirm cancel reschedule signature doorstep neighbour locker',
    'postcode street harbour station office branch manager support agent request answer question',
)
_WORDS = tuple(word for line in _LINES for word in line.split())


def _sentence(seed: str, words: int) -> str:
    """`words` words chosen by hashing `seed`: the same text for the same seed, in every process."""
    digest = hashlib.sha256(seed.encode()).digest()
    while len(digest) < words:
        digest += hashlib.sha256(digest).digest()
    return ' '.join(_WORDS[byte % len(_WORDS)] for byte in digest[:words]).capitalize() + '.'


def prompt_for(conversation_id: str) -> str:
    """The prompt of a run in `conversation_id`: it names the conversation, so each run's texts differ."""
    return f'{_sentence(conversation_id, 24)} Reference {conversation_id}.'


def lookup(item: str) -> str:
    """Look up an order, parcel or ticket by its reference."""
    return f'{item}: {_sentence(item, 48)}'


def _scripted(latency: float) -> FunctionModel:
    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if latency:
            await asyncio.sleep(latency)
        # Tool returns since this run's prompt: the script's position, the same on a retry.
        done = 0
        for message in reversed(messages):
            if isinstance(message, ModelRequest):
                if any(part.part_kind == 'user-prompt' for part in message.parts):
                    break
                done += sum(isinstance(part, ToolReturnPart) for part in message.parts)
        prompts = [
            str(p.content)
            for m in messages
            if isinstance(m, ModelRequest)
            for p in m.parts
            if p.part_kind == 'user-prompt'
        ]
        reference = prompts[-1].rsplit(' ', 1)[-1].rstrip('.') if prompts else 'none'
        if done < TOOL_CALLS:
            return ModelResponse(
                parts=[ToolCallPart('lookup', {'item': f'{reference}/{done}'}, tool_call_id=f'call-{done}')]
            )
        return ModelResponse(parts=[TextPart(_sentence(f'answer {reference}', 36))])

    return FunctionModel(respond, model_name='scripted')


def build(
    name: str, *, recall: ConversationRecall[Any] | None, latency: float = LATENCY, durable: bool = True
) -> Agent[RecallDeps, str]:
    """The 4-request agent, with `recall` or without; `durable=False` leaves out `TemporalDurability`
    (a plain `agent.run` in one process)."""
    capabilities: list[AbstractCapability[Any]] = [] if recall is None else [recall]
    if durable:
        capabilities.append(TemporalDurability(activity_config=ACTIVITY_CONFIG))
    return Agent(
        _scripted(latency),
        name=name,
        deps_type=RecallDeps,
        tools=[lookup],
        capabilities=capabilities,
    )


def expected_kinds() -> list[str]:
    """The part kinds of a run's messages, in order: what a stored conversation must hold, once."""
    return ['user-prompt', *['tool-call', 'tool-return'] * TOOL_CALLS, 'text']


class NothingStored:
    """A store that acknowledges every append and keeps nothing: what `ConversationRecall` costs before
    any store does any work (the `FLOOR` agent's).

    Each append is answered as a store answers a first write of its messages (stored, at the head, the
    conversation's length counted per conversation in this process), so the capability takes the path
    it takes over a real store, hashes and all. Nothing can be searched or loaded: a benchmark's store.
    """

    def __init__(self) -> None:
        self.appends = 0
        self._lengths: dict[str, int] = {}

    async def append(self, request: AppendRequest) -> AppendResult:
        self.appends += 1
        length = max(self._lengths.get(request.conversation_id, 0), request.base_length) + len(request.messages)
        # Bounded: a long benchmark run keeps the most recent conversations only.
        if len(self._lengths) >= 10_000 and request.conversation_id not in self._lengths:
            self._lengths.pop(next(iter(self._lengths)))
        self._lengths[request.conversation_id] = length
        return AppendResult(
            conversation_id=request.conversation_id,
            head_id=f'{request.idempotency_key}/{len(request.messages)}',
            length=length,
            stored=len(request.messages),
        )


without_recall = build(WITHOUT, recall=None)
with_recall = build(WITH, recall=ConversationRecall())
nothing_stored = build(FLOOR, recall=ConversationRecall(store=NothingStored()))
