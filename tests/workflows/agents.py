"""Agents the Temporal tests run, defined outside any workflow module (see FINDINGS: the sandbox
re-imports a workflow module per task, so an agent defined there would be rebuilt every time)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator
from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent, RunContext, ToolOutput
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.capabilities.instrumentation import Instrumentation
from pydantic_ai.durable_exec.temporal import TemporalDurability
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

from temporal_recall import ConversationRecall, RecallDeps
from temporal_recall.testing import scripted_model, text, tool_call

from .._compaction import SummarizeEarlierTurns
from .._said import user_prompts


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f'It is sunny in {city}, 21 degrees.'


def big_report(size: int) -> str:
    """A report of `size` characters."""
    return 'x' * size


def get_forecast(city: str) -> str:
    """A 24-hour forecast for a city: about 1.8 KB, the size of a typical weather API answer."""
    winds = ('N', 'NE', 'E', 'SE', 'S', 'SW', 'W', 'NW')
    return '\n'.join(
        f'{hour:02d}:00 {city}: {12 + (hour * 7) % 11} C, wind {5 + hour % 9} km/h from {winds[hour % 8]}, '
        f'humidity {40 + (hour * 13) % 50}%, precipitation {(hour * 3) % 10 * 10}%'
        for hour in range(24)
    )


def _tool_loop(calls: int, tool: str = 'get_weather'):
    """A model that calls `tool` `calls` times, one call per response, then answers."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = sum(1 for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart))
        if done < calls:
            return ModelResponse(parts=[ToolCallPart(tool, {'city': f'city-{done}'}, tool_call_id=f'c{done}')])
        return ModelResponse(parts=[TextPart(f'Checked {calls} cities.')])

    return FunctionModel(respond, model_name='tool-loop')


def _recall_then_answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1]
    if isinstance(last, ModelRequest):
        returns = [p for p in last.parts if isinstance(p, ToolReturnPart)]
        if returns:
            return ModelResponse(parts=[TextPart(f'I found: {returns[0].model_response_str()}')])
        prompt = str(last.parts[-1].content) if last.parts else ''  # type: ignore[union-attr]
        if prompt.startswith('recall '):
            return ModelResponse(
                parts=[
                    ToolCallPart(
                        'search_conversation_history', {'query': prompt.removeprefix('recall ')}, tool_call_id='r1'
                    )
                ]
            )
    return ModelResponse(parts=[TextPart('ok')])


MODEL_CALLS: list[str] = []
"""Every model request any test agent answered, by model name; replay tests assert it stays unchanged."""


def _counted(model: FunctionModel) -> FunctionModel:
    inner = model.function
    if inner is not None:

        def counted(messages: list[ModelMessage], info: AgentInfo) -> Any:
            MODEL_CALLS.append(model.model_name)
            return inner(messages, info)

        model.function = counted
    inner_stream = model.stream_function
    if inner_stream is not None:

        def counted_stream(messages: list[ModelMessage], info: AgentInfo) -> Any:
            MODEL_CALLS.append(model.model_name)
            return inner_stream(messages, info)

        model.stream_function = counted_stream
    return model


def _durable(
    name: str, model, *, recall: bool = True, tools=(get_weather,), system_prompt: str = ''
) -> Agent[RecallDeps, str]:
    capabilities = [ConversationRecall()] if recall else []
    return Agent(
        _counted(model),
        name=name,
        deps_type=RecallDeps,
        tools=list(tools),
        system_prompt=system_prompt or (),
        capabilities=[*capabilities, TemporalDurability()],
    )


weather_agent = _durable(
    'weather', scripted_model(tool_call('get_weather', {'city': 'Paris'}), text('Sunny in Paris.'))
)
briefed_weather_agent = _durable(
    'briefed_weather',
    scripted_model(tool_call('get_weather', {'city': 'Paris'}), text('Sunny in Paris.')),
    system_prompt='You are the Paris desk of a weather service.',
)
"""The weather agent with a system prompt, which pydantic-ai sends in the request of the first prompt."""
weather_agent_no_persistence = _durable(
    'weather_bare', scripted_model(tool_call('get_weather', {'city': 'Paris'}), text('Sunny in Paris.')), recall=False
)
many_tools_agent = _durable('many_tools', _tool_loop(45))
many_tools_agent_no_persistence = _durable('many_tools_bare', _tool_loop(45), recall=False)
recall_agent = _durable('recaller', FunctionModel(_recall_then_answer, model_name='recaller'))
windowed_recall_agent = Agent(
    _counted(FunctionModel(_recall_then_answer, model_name='windowed')),
    name='windowed',
    deps_type=RecallDeps,
    # The most common way apps bound context: the model is sent the last 3 messages of the history.
    capabilities=[ProcessHistory(lambda messages: messages[-3:]), ConversationRecall(), TemporalDurability()],
)
compacting_agent = Agent(
    _counted(FunctionModel(_recall_then_answer, model_name='compacting')),
    name='compacting',
    deps_type=RecallDeps,
    # pydantic-ai's own compaction: past 4 messages, the earlier turns become one summary in the run's history.
    capabilities=[SummarizeEarlierTurns(threshold=4), ConversationRecall(), TemporalDurability()],
)
big_tool_agent = _durable(
    'big_tool', scripted_model(tool_call('big_report', {'size': 2_094_000}), text('done')), tools=(big_report,)
)


def slow_tool(seconds: float) -> str:
    """Wait, then report; tells the test it started through a marker file so it can kill the worker."""
    import os
    import time
    from pathlib import Path

    marker = os.environ.get('RECALL_TEST_TOOL_MARKER')
    if marker:
        Path(marker).write_text('started')
    time.sleep(seconds)
    return f'waited {seconds}s'


slow_tool_agent = Agent(
    _counted(scripted_model(tool_call('slow_tool', {'seconds': 1.0}), text('Done waiting.'))),
    name='slow_tool',
    deps_type=RecallDeps,
    tools=[slow_tool],
    capabilities=[
        ConversationRecall(),
        # Short timeouts so a killed worker's activity is retried within seconds, not minutes (the
        # tool sleeps 1 s; the rest of the margin is for a loaded machine).
        TemporalDurability(activity_config={'start_to_close_timeout': timedelta(seconds=4)}),
    ],
)


slow_turn_agent = Agent(
    _counted(scripted_model(tool_call('slow_tool', {'seconds': 3.0}), text('Done waiting.'))),
    name='slow_turn',
    deps_type=RecallDeps,
    tools=[slow_tool],
    capabilities=[ConversationRecall(), TemporalDurability()],
)
"""A turn of about three seconds: longer than the idle timeout its test sets."""


def get_weather_slowly(city: str) -> str:
    """The weather in a city, after a second: long enough that a killed worker leaves tool calls in flight.

    Writes `start` / `end` lines to `$RECALL_TEST_TOOL_LOG` (one file per worker process), so a test
    can tell that the kill interrupted calls.
    """
    import os
    import time
    from pathlib import Path

    log = os.environ.get('RECALL_TEST_TOOL_LOG')
    if log:
        with Path(log).open('a') as file:
            file.write('start\n')
    time.sleep(1.0)
    if log:
        with Path(log).open('a') as file:
            file.write('end\n')
    return f'It is sunny in {city}, 21 degrees.'


pg_weather_agent = Agent(
    _counted(scripted_model(tool_call('get_weather_slowly', {'city': 'Paris'}), text('Sunny in Paris.'))),
    name='pg_weather',
    deps_type=RecallDeps,
    tools=[get_weather_slowly],
    capabilities=[
        ConversationRecall(),
        # A killed worker's activities (tool, model, store step) are retried elsewhere after 5 s, not 60.
        TemporalDurability(activity_config={'start_to_close_timeout': timedelta(seconds=5)}),
    ],
)


tool_loop_200_agent = _durable('tool_loop_200', _tool_loop(200))
tool_loop_90_agent = _durable('tool_loop_90', _tool_loop(90))
forecast_15_agent = _durable('forecast_15', _tool_loop(15, 'get_forecast'), tools=(get_forecast,))
forecast_45_agent = _durable('forecast_45', _tool_loop(45, 'get_forecast'), tools=(get_forecast,))
forecast_200_agent = _durable('forecast_200', _tool_loop(200, 'get_forecast'), tools=(get_forecast,))
"""One agent with 15, 45 and 200 calls of a tool whose answers are realistically sized: the codec tests use 15,
scripts/measure_history_size.py all three."""


# --- In-activity persistence: an output tool, streaming, attempts that answer differently ----------


class Forecast(BaseModel):
    city: str
    sky: str


def _forecaster(name: str, *capabilities: Any, counted: bool = False) -> Agent[RecallDeps, Forecast]:
    """An agent that calls `get_weather`, then answers through its output tool `final_result`."""
    model = scripted_model(
        tool_call('get_weather', {'city': 'Paris'}),
        tool_call('final_result', {'city': 'Paris', 'sky': 'sunny'}, tool_call_id='out-1'),
    )
    return Agent(
        _counted(model) if counted else model,
        name=name,
        deps_type=RecallDeps,
        output_type=ToolOutput(Forecast),
        tools=[get_weather],
        capabilities=[*capabilities, TemporalDurability()],
    )


output_tool_agent = _forecaster('output_tool', ConversationRecall(), counted=True)
traced_output_tool_agent = _forecaster('traced_output_tool', Instrumentation(), ConversationRecall())
"""`output_tool_agent` with pydantic-ai's OpenTelemetry instrumentation (tests/test_tracing.py)."""
output_tool_agent_no_persistence = _forecaster('output_bare')


def _tool_returns(messages: list[ModelMessage]) -> int:
    return sum(1 for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart))


async def _stream_weather(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
    done = _tool_returns(messages)
    if done < 3:
        yield {0: DeltaToolCall(name='get_weather', json_args=f'{{"city": "city-{done}"}}', tool_call_id=f's{done}')}
    else:
        for word in ('Three ', 'cities ', 'checked.'):
            yield word


async def _ignore_events(ctx: RunContext[RecallDeps], events: AsyncIterable[Any]) -> None:
    async for _ in events:
        pass


streaming_agent = Agent(
    _counted(FunctionModel(stream_function=_stream_weather, model_name='streamer')),
    name='streaming',
    deps_type=RecallDeps,
    tools=[get_weather],
    # An event stream handler makes every model request a streaming activity.
    capabilities=[ConversationRecall(), TemporalDurability(event_stream_handler=_ignore_events)],
)


def _attempt() -> int:
    from temporalio import activity

    return activity.info().attempt if activity.in_activity() else 1


def _answer_per_attempt(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Calls the tool, then answers with text that names the activity attempt answering."""
    if not _tool_returns(messages):
        return ModelResponse(parts=[ToolCallPart('get_weather', {'city': 'Paris'}, tool_call_id='a1')])
    return ModelResponse(parts=[TextPart(f'answer from attempt {_attempt()}')])


retried_agent = Agent(
    _counted(FunctionModel(_answer_per_attempt, model_name='per-attempt')),
    name='retried',
    deps_type=RecallDeps,
    tools=[get_weather],
    capabilities=[
        ConversationRecall(),
        TemporalDurability(
            activity_config={
                'start_to_close_timeout': timedelta(seconds=3),
                'retry_policy': RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=5),
            }
        ),
    ],
)


async def _slow_first_attempt(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The final answer's first attempt outlives its start-to-close timeout, then answers anyway (too late)."""
    if not _tool_returns(messages):
        return ModelResponse(parts=[ToolCallPart('get_weather', {'city': 'Paris'}, tool_call_id='l1')])
    attempt = _attempt()
    if attempt == 1:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            # Like a worker cut off from the server: it never hears its attempt was given up on.
            await asyncio.sleep(3)
    return ModelResponse(parts=[TextPart(f'answer from attempt {attempt}')])


late_attempt_agent = Agent(
    _counted(FunctionModel(_slow_first_attempt, model_name='late-attempt')),
    name='late_attempt',
    deps_type=RecallDeps,
    tools=[get_weather],
    capabilities=[
        ConversationRecall(),
        TemporalDurability(
            activity_config={
                'start_to_close_timeout': timedelta(seconds=2),
                'retry_policy': RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=5),
            }
        ),
    ],
)


echo_agent = _durable('echo', scripted_model(text('repeat this exactly')), tools=())


FLAKY_SENT: list[list[str]] = []
"""The user prompts each call to the flaky agent's model was sent, failed calls included."""

FLAKY_ONCE: set[str] = set()
"""Prompts the flaky agent's provider fails the next time a turn ends with one (then forgets)."""


def _down_for_fail_prompts(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A provider that fails every turn whose prompt starts with `fail`, and once each prompt of
    `FLAKY_ONCE`, and answers the others."""
    FLAKY_SENT.append(user_prompts(messages))
    last = messages[-1]
    prompt = str(last.parts[-1].content) if isinstance(last, ModelRequest) and last.parts else ''  # type: ignore[union-attr]
    if prompt.startswith('fail') or prompt in FLAKY_ONCE:
        FLAKY_ONCE.discard(prompt)
        raise ApplicationError('the provider is down', type='ProviderDown', non_retryable=True)
    return ModelResponse(parts=[TextPart(f'ok: {prompt}')])


flaky_agent = Agent(
    FunctionModel(_down_for_fail_prompts, model_name='flaky'),
    name='flaky',
    deps_type=RecallDeps,
    capabilities=[ConversationRecall(), TemporalDurability()],
)

flaky_system_agent = Agent(
    FunctionModel(_down_for_fail_prompts, model_name='flaky'),
    name='flaky_system',
    deps_type=RecallDeps,
    system_prompt='Answer in one line.',
    capabilities=[ConversationRecall(), TemporalDurability()],
)
"""The flaky agent with a system prompt, which the first request of a conversation carries with its prompt."""
