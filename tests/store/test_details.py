"""A conversation's title and metadata (`ConversationStore.update`, pydantic-ai 2.78), on every backend."""

from __future__ import annotations

import pytest
from pydantic_ai import Agent
from pydantic_ai.conversation_store import ConversationConflict
from pydantic_ai.exceptions import UserError
from pydantic_ai.models.test import TestModel

from temporal_recall.errors import InvalidIdentifier

from ._support import AnyStore

AGENT = Agent(TestModel(custom_output_text='Noted.'))


async def _saved(store: AnyStore, conversation_id: str) -> None:
    await store.save(await AGENT.run('Where is order A-1042?', conversation_id=conversation_id))


async def test_a_title_set_once_survives_every_later_save_and_lists(recall_store: AnyStore):
    await _saved(recall_store, 'titled')
    revision = (await recall_store.read_record('titled')).revision
    record = await recall_store.update('titled', title='Order A-1042', expected_title=None)
    assert (record.title, record.metadata, record.revision) == ('Order A-1042', None, revision)
    record = await recall_store.update('titled', metadata={'model': 'gpt-x', 'pinned': True})
    assert (record.title, record.metadata) == ('Order A-1042', {'model': 'gpt-x', 'pinned': True})

    conversation = await recall_store.load('titled')
    assert conversation is not None
    await recall_store.save(await AGENT.run('And order B-7?', conversation=conversation))
    record = await recall_store.read_record('titled')
    assert record is not None and record.revision != revision
    assert (record.title, record.metadata) == ('Order A-1042', {'model': 'gpt-x', 'pinned': True})
    assert [(r.conversation_id, r.title) for r in await recall_store.list_conversations()] == [
        ('titled', 'Order A-1042')
    ]


async def test_an_expected_title_guards_the_update_and_none_clears(recall_store: AnyStore):
    await _saved(recall_store, 'guarded')
    await recall_store.update('guarded', title='Set by the user')
    # An agent titling after the first turn passes expected_title=None: the user's title stays.
    with pytest.raises(ConversationConflict):
        await recall_store.update('guarded', title='Set by an agent', expected_title=None)
    record = await recall_store.update('guarded', title='Renamed', expected_title='Set by the user')
    assert record.title == 'Renamed'
    record = await recall_store.update('guarded', title=None, metadata=None)
    assert (record.title, record.metadata) == (None, None)


async def test_update_is_scoped_and_bad_details_are_refused_with_nothing_written(recall_store: AnyStore):
    await recall_store.save(await AGENT.run('hello', conversation_id='tenant-a'), scope='a')
    with pytest.raises(UserError, match='not in the store'):
        await recall_store.update('tenant-a', title='x', scope='b')
    with pytest.raises(UserError, match='not in the store'):
        await recall_store.update('absent', title='x')
    with pytest.raises(InvalidIdentifier, match='JSON-serializable'):
        await recall_store.update('tenant-a', metadata={'when': object()})
    with pytest.raises(InvalidIdentifier, match='title must be text'):
        await recall_store.update('tenant-a', title=42)  # pyright: ignore[reportArgumentType]
    record = await recall_store.read_record('tenant-a')
    assert record is not None and (record.title, record.metadata) == (None, None)
