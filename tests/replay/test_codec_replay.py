"""A history recorded with RecallDataCodec replays with the bodies store as its only source of payloads.

`codec/one_prompt_with_tool.json` holds references only; `codec/bodies.db` holds what they point to. It
was recorded before persistence moved into the model-request activities. `codec/in_activity/` holds the
pair recorded under pydantic-ai 2.68, `codec/pydantic_ai_2_78/` the one 779acbc recorded under 2.78,
`codec/canonical_form_2/` the one with form-2 markers, and `codec/reload_after_failed_turn/` today's.
None is ever re-recorded: a new pair goes to a new folder
(`.venv/bin/python -m tests.replay.record_histories codec`).
"""

from __future__ import annotations

import base64
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from temporal_recall import RecallPlugin, message_codec_plugin
from temporal_recall.codec import ENCODING
from temporal_recall.testing import replay

from ..workflows import agents
from .conftest import StoreThatMustNotBeCalled, store_plugin
from .test_replay import AGENTS

CODEC = Path(__file__).parent / 'codec'
RECORDINGS = [
    CODEC,
    CODEC / 'in_activity',
    CODEC / 'pydantic_ai_2_78',
    CODEC / 'canonical_form_2',
    CODEC / 'reload_after_failed_turn',
]


@pytest.fixture(
    params=RECORDINGS,
    ids=['before-in-activity', 'in-activity', 'pydantic-ai-2.78', 'canonical-form-2', 'reload-after-failed-turn'],
)
def recording(request: pytest.FixtureRequest) -> Path:
    return request.param


@pytest.fixture
def history(recording: Path) -> str:
    return (recording / 'one_prompt_with_tool.json').read_text()


@pytest.fixture
def bodies(tmp_path: Path, recording: Path) -> Path:
    """A copy of the recorded bodies: replay may open it for writing, the committed file stays as is."""
    copy = tmp_path / 'bodies.db'
    shutil.copyfile(recording / 'bodies.db', copy)
    return copy


def test_the_recorded_history_carries_references_not_messages(history: str):
    requests = [
        event['activityTaskScheduledEventAttributes']['input']['payloads'][0]
        for event in json.loads(history)['events']
        if event.get('activityTaskScheduledEventAttributes', {})
        .get('activityType', {})
        .get('name', '')
        .endswith('__model_request')
    ]
    assert len(requests) == 2
    for payload in requests:
        assert base64.b64decode(payload['metadata']['encoding']) == ENCODING
        assert b'"parts"' not in base64.b64decode(payload['data'])  # the messages live in the bodies only


async def test_replays_from_the_store_alone(history: str, bodies: Path, forbidden_store: StoreThatMustNotBeCalled):
    model_calls_before = len(agents.MODEL_CALLS)
    plugin = message_codec_plugin(str(bodies))
    try:
        results = await replay([history], agents=AGENTS, plugins=[plugin, store_plugin(forbidden_store)])
    finally:
        await plugin.codec.aclose()
    assert all(result.replay_failure is None for result in results.replay_failures.values())
    assert forbidden_store.calls == []
    assert len(agents.MODEL_CALLS) == model_calls_before


async def test_without_the_bodies_replay_fails_naming_the_missing_hash(
    history: str, bodies: Path, forbidden_store: StoreThatMustNotBeCalled
):
    with sqlite3.connect(bodies) as db:
        db.execute('DELETE FROM message_bodies')
    plugin = message_codec_plugin(str(bodies))
    try:
        with pytest.raises(Exception, match=r'Message body [0-9a-f]{64} is not in the store'):
            await replay([history], agents=AGENTS, plugins=[plugin])
    finally:
        await plugin.codec.aclose()


async def test_without_the_codec_plugin_replay_fails_naming_it(history: str):
    with pytest.raises(Exception) as raised:
        await replay([history], agents=AGENTS)
    failure = str(raised.value) + ''.join(str(cause) for cause in _causes(raised.value))
    assert 'message_codec_plugin' in failure, failure
    assert 'Unknown payload encoding' not in failure, failure


async def test_a_replayer_with_recall_plugin_and_no_codec_fails_naming_it(history: str, tmp_path: Path):
    replayer = Replayer(
        workflows=[],  # the plugin registers the shipped workflows
        plugins=[PydanticAIPlugin(), RecallPlugin(tmp_path / 'never.db', agents=AGENTS)],
    )
    with pytest.raises(Exception) as raised:
        await replayer.replay_workflow(WorkflowHistory.from_json('codec', json.loads(history)))
    failure = str(raised.value) + ''.join(str(cause) for cause in _causes(raised.value))
    assert 'message_codec_plugin' in failure, failure


def _causes(error: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    while error.__cause__ is not None:
        error = error.__cause__
        found.append(error)
    return found
