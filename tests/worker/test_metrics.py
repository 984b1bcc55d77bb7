"""Recall's metrics, scraped from the Prometheus endpoint of a real worker's Temporal runtime after
real runs, and compared with what the runs did (history events, stored messages, returned hits)."""

from __future__ import annotations

import re
import urllib.request
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from pydantic_ai import Agent
from pydantic_ai.messages import ToolReturnPart
from temporalio.client import Client

from temporal_recall import ConversationRecall, RunPromptInput, RunPromptWorkflow, SearchResult
from temporal_recall._devserver import free_port
from temporal_recall._metrics import prometheus_runtime
from temporal_recall.store import open_store
from temporal_recall.testing import DevServer, connect, running_worker
from temporal_recall.text._documents import RECALL_TOOL_NAME

from ..replay.workflows import RecallDirectlyWorkflow
from ..workflows.agents import recall_agent, weather_agent

pytestmark = pytest.mark.temporal

STORE_STEP = 'agent__weather__capability__recall__store_step'
MODEL_REQUEST = 'agent__weather__model_request'
RECALL_TOOL = 'agent__recaller__toolset__recall-search__call_tool'
SEARCH = 'temporal_recall.search'
SAMPLE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def scrape(url: str) -> list[tuple[str, dict[str, str], float]]:
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    samples = []
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match:
            labels = dict(LABEL.findall(match['labels'] or ''))
            samples.append((match['name'], labels, float(match['value'])))
    return samples


def value(samples: list[tuple[str, dict[str, str], float]], name: str, **labels: str) -> float:
    found = [v for n, ls, v in samples if n == name and all(ls.get(k) == want for k, want in labels.items())]
    assert found, f'{name} with {labels} is not on the metrics endpoint'
    return sum(found)


def bucket_of_one(samples: list[tuple[str, dict[str, str], float]], name: str, **labels: str) -> tuple[float, float]:
    """`(lower, upper]`: the bounds of the bucket that holds histogram `name`'s single observation."""
    counts = sorted(
        (float(ls['le']), v)
        for n, ls, v in samples
        if n == f'{name}_bucket' and all(ls.get(k) == want for k, want in labels.items())
    )
    assert counts and counts[-1][1] == 1, f'{name} with {labels} does not hold exactly one observation'
    bounds = [float('-inf'), *(bound for bound, _ in counts)]
    first = next(index for index, (_, count) in enumerate(counts) if count == 1)
    return bounds[first], bounds[first + 1]


@dataclass
class Scenario:
    samples: list[tuple[str, dict[str, str], float]]
    queue: str
    store_step_activities: int
    model_request_activities: int
    stored_messages: int
    weather_messages: int
    tool_searches: int
    tool_hits: int
    workflow_hits: int


async def _activities_named(client: Client, workflow_id: str, name: str) -> int:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return sum(
        1
        for event in history.events
        if event.HasField('activity_task_completed_event_attributes')
        and history.events[
            event.activity_task_completed_event_attributes.scheduled_event_id - 1
        ].activity_task_scheduled_event_attributes.activity_type.name
        == name
    )


@pytest_asyncio.fixture(scope='module', loop_scope='session')
async def scenario(temporal_dev_server: DevServer, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Scenario]:
    """One worker with a Prometheus runtime: a persisted run, a model-tool search, a workflow search."""
    port = free_port()
    client = await connect(temporal_dev_server, runtime=prometheus_runtime(f'127.0.0.1:{port}'))
    store = str(tmp_path_factory.mktemp('metrics') / 'recall.db')
    agents = [weather_agent, recall_agent]
    async with running_worker(client, agents=agents, store=store, workflows=[RecallDirectlyWorkflow]) as worker:
        queue = worker.task_queue
        persisted = f'metrics-weather-{uuid.uuid4()}'
        weather = await client.execute_workflow(
            RunPromptWorkflow.run,
            RunPromptInput(prompt='Weather in Paris?', conversation_id='metrics', agent='weather'),
            id=persisted,
            task_queue=queue,
        )
        await client.execute_workflow(
            RunPromptWorkflow.run,
            RunPromptInput(prompt='recall Paris', conversation_id='metrics', agent='recaller'),
            id=f'metrics-recall-{uuid.uuid4()}',
            task_queue=queue,
        )
        found: SearchResult = await client.execute_workflow(
            RecallDirectlyWorkflow.run, 'metrics', id=f'metrics-direct-{uuid.uuid4()}', task_queue=queue
        )
        steps = await _activities_named(client, persisted, STORE_STEP)
        model_requests = await _activities_named(client, persisted, MODEL_REQUEST)
    reader = await open_store(Path(store))
    try:
        entries = await reader.load_entries('metrics')
    finally:
        await reader.close()
    assert entries and found.hits
    # What the recall tool answered, as the model read it: a line `[n] position …` per hit.
    [answer] = [
        part.model_response_str()
        for entry in entries
        for part in entry.message.parts
        if isinstance(part, ToolReturnPart) and part.tool_name == RECALL_TOOL_NAME
    ]
    tool_hits = len(re.findall(r'^\[\d+\] position ', answer, re.MULTILINE))
    assert tool_hits, answer
    yield Scenario(
        samples=scrape(f'http://127.0.0.1:{port}/metrics'),
        queue=queue,
        store_step_activities=steps,
        model_request_activities=model_requests,
        stored_messages=len(entries),
        weather_messages=sum(1 for entry in entries if entry.message.run_id == weather.run_id),
        tool_searches=1,
        tool_hits=tool_hits,
        workflow_hits=len(found.hits),
    )


def test_step_writes_count_every_write_of_the_model_request_activities(scenario: Scenario) -> None:
    # The weather run (model, tool, model) persists inside its model-request activities: each writes
    # the request's new messages (the prompt, then the tool's return) with its response, in one write.
    assert scenario.store_step_activities == 0
    assert scenario.model_request_activities == 2
    writes = value(
        scenario.samples, 'temporal_recall_step_writes', task_queue=scenario.queue, activity_type=MODEL_REQUEST
    )
    assert writes == scenario.model_request_activities


def test_messages_stored_counts_each_new_message_once(scenario: Scenario) -> None:
    stored = sum(
        v
        for name, labels, v in scenario.samples
        if name == 'temporal_recall_messages_stored' and labels.get('task_queue') == scenario.queue
    )
    assert stored == scenario.stored_messages
    weather = value(
        scenario.samples, 'temporal_recall_messages_stored', task_queue=scenario.queue, activity_type=MODEL_REQUEST
    )
    assert weather == scenario.weather_messages == 4  # prompt, tool call, tool return, answer


def test_search_latency_is_a_histogram_per_activity_type(scenario: Scenario) -> None:
    for activity_type, searches in ((RECALL_TOOL, scenario.tool_searches), (SEARCH, 1)):
        labels = {'task_queue': scenario.queue, 'activity_type': activity_type}
        assert value(scenario.samples, 'temporal_recall_search_latency_count', **labels) == searches
        assert value(scenario.samples, 'temporal_recall_search_latency_bucket', le='+Inf', **labels) == searches
        # How long a search takes is the machine's business; that the one time recorded is the one the
        # buckets placed is the histogram's.
        lower, upper = bucket_of_one(scenario.samples, 'temporal_recall_search_latency', **labels)
        assert lower < value(scenario.samples, 'temporal_recall_search_latency_sum', **labels) <= upper


def test_search_hits_sum_the_hits_returned(scenario: Scenario) -> None:
    labels = {'task_queue': scenario.queue, 'activity_type': SEARCH}
    assert value(scenario.samples, 'temporal_recall_search_hits_sum', **labels) == scenario.workflow_hits
    assert value(scenario.samples, 'temporal_recall_search_hits_count', **labels) == 1
    tool = {'task_queue': scenario.queue, 'activity_type': RECALL_TOOL}
    assert value(scenario.samples, 'temporal_recall_search_hits_sum', **tool) == scenario.tool_hits
    assert value(scenario.samples, 'temporal_recall_search_hits_count', **tool) == scenario.tool_searches


def test_recall_metrics_sit_beside_the_sdks_own(scenario: Scenario) -> None:
    names = {name for name, _, _ in scenario.samples}
    assert 'temporal_activity_execution_latency_count' in names
    executions = value(
        scenario.samples,
        'temporal_activity_execution_latency_count',
        task_queue=scenario.queue,
        activity_type=MODEL_REQUEST,
    )
    assert executions == scenario.model_request_activities


async def test_a_plain_agent_run_persists_and_searches_without_a_meter(tmp_path: Path) -> None:
    """Outside an activity there is no SDK meter (asking for one raises), so recording is skipped."""
    store = await open_store(tmp_path / 'plain.db')
    try:
        plain = Agent(recall_agent.model, capabilities=[ConversationRecall(store=store)])
        await plain.run('Weather in Paris?', conversation_id='plain')
        result = await plain.run('recall Paris', conversation_id='plain')
        assert 'Paris' in result.output
        assert len(await store.load_entries('plain') or []) == 4
    finally:
        await store.close()
