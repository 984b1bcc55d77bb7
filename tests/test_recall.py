"""Search isolation and hostile queries, through the same `search_history` every entry point uses.

The isolation test is property-based: generated tenants, conversations, runs, forks and branches,
generated queries and targets. Whatever is asked, no hit may come from another conversation (for a
conversation target) or another tenant scope, and a conversation outside the caller's scope must
look exactly like one that does not exist.
"""

from __future__ import annotations

import asyncio
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from temporal_recall._recall import search_history
from temporal_recall.content import content_hash
from temporal_recall.errors import InvalidQuery, UnknownConversation
from temporal_recall.models import SearchRequest
from temporal_recall.store import AppendRequest, SqliteConversationStore

WORDS = ['alpha', 'beta', 'gamma', 'delta', 'invoice', 'refund', 'paris', 'order', 'a1042', 'secret']
SCOPES = ['acme', 'globex', None]


@dataclass
class World:
    """What was written, to check every answer against."""

    scope_of: dict[str, str | None] = field(default_factory=dict[str, str | None])
    texts_of: dict[str, set[str]] = field(default_factory=dict[str, set[str]])
    runs_of: dict[str, set[str]] = field(default_factory=dict[str, set[str]])


def _turn(text: str, answer: str) -> list[ModelMessage]:
    return [ModelRequest(parts=[UserPromptPart(text)]), ModelResponse(parts=[TextPart(answer)])]


conversation_plans = st.lists(
    st.tuples(
        st.sampled_from(SCOPES),
        st.lists(
            st.tuples(
                st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
                st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
            ),
            min_size=1,
            max_size=4,
        ),
        st.sampled_from(['none', 'fork-same', 'fork-other', 'branch']),
    ),
    min_size=2,
    max_size=5,
)

targets = st.lists(
    st.tuples(
        st.lists(st.sampled_from([*WORDS, 'OR', 'NOT', '*', '"x"']), min_size=1, max_size=3),
        st.sampled_from(SCOPES),
        st.integers(min_value=-1, max_value=6),  # conversation index; -1 means `all`
        st.sampled_from([None, 'run-0', 'run-1', 'run-x']),
    ),
    min_size=1,
    max_size=8,
)


async def _build(store: SqliteConversationStore, plans) -> World:
    world = World()
    for number, (scope, turns, twist) in enumerate(plans):
        conversation_id = f'conv-{number}'
        history: list[ModelMessage] = []
        for step, (said, answered) in enumerate(turns):
            messages = _turn(f'{conversation_id} says ' + ' '.join(said), ' '.join(answered))
            await store.append(
                AppendRequest(
                    conversation_id=conversation_id,
                    scope=scope,
                    idempotency_key=f'{conversation_id}/{step}',
                    base_length=len(history),
                    base_hash=content_hash(history[-1]) if history else None,
                    messages=messages,
                    run_id=f'run-{step % 2}',
                )
            )
            history.extend(messages)
        world.scope_of[conversation_id] = scope
        world.texts_of[conversation_id] = {content_hash(m) for m in history}
        world.runs_of[conversation_id] = {f'run-{step % 2}' for step in range(len(turns))}
        if twist == 'branch' and len(history) > 2:
            # A rewritten history: the old branch stays part of the conversation (and findable).
            rewrite = _turn(f'{conversation_id} rewrote refund', 'rewritten')
            await store.append(
                AppendRequest(
                    conversation_id=conversation_id,
                    scope=scope,
                    idempotency_key=f'{conversation_id}/rewrite',
                    base_length=2,
                    base_hash=content_hash(history[1]),
                    messages=rewrite,
                    run_id='run-1',
                )
            )
            world.texts_of[conversation_id] |= {content_hash(m) for m in rewrite}
            world.runs_of[conversation_id].add('run-1')
        elif twist.startswith('fork'):
            fork_scope = scope if twist == 'fork-same' else ('globex' if scope != 'globex' else 'acme')
            fork_id = f'{conversation_id}-fork'
            await store.fork(conversation_id, new_conversation_id=fork_id, scope=fork_scope, at=2)
            world.scope_of[fork_id] = fork_scope
            world.texts_of[fork_id] = {content_hash(m) for m in history[:2]}
            world.runs_of[fork_id] = {'run-0'}
    return world


async def _check(store: SqliteConversationStore, world: World, asked) -> None:
    conversations = sorted(world.scope_of)
    for words, scope, index, run_id in asked:
        everything = index < 0 or index >= len(conversations)
        conversation_id = None if everything else conversations[index]
        request = SearchRequest(
            query=' '.join(words),
            conversation_id=conversation_id,
            all_conversations=everything,
            scope=scope,
            run_id=run_id,
            limit=100,
        )
        if not re.search(r'\w', ' '.join(words)):
            with pytest.raises(InvalidQuery):
                await search_history(store, request)
            continue
        if conversation_id is not None and world.scope_of[conversation_id] != scope:
            # Out of scope answers exactly like a conversation that does not exist.
            with pytest.raises(UnknownConversation) as outside:
                await search_history(store, request)
            with pytest.raises(UnknownConversation) as missing:
                await search_history(store, request.model_copy(update={'conversation_id': 'conv-never'}))
            assert str(outside.value).replace(conversation_id, '?') == str(missing.value).replace('conv-never', '?')
            continue
        try:
            result = await search_history(store, request)
        except UnknownConversation as error:
            raise AssertionError(f'{request!r} refused an in-scope conversation; world={world!r}') from error
        allowed = [c for c in conversations if world.scope_of[c] == scope] if everything else [conversation_id]
        allowed_hashes = set().union(*(world.texts_of[c] for c in allowed)) if allowed else set()
        for hit in result.hits:
            assert hit.conversation_id in allowed
            assert world.scope_of[hit.conversation_id] == scope
            entry = await store.read_entry(hit.entry_id)
            assert content_hash(entry.message) in allowed_hashes
            if run_id is not None:
                assert hit.run_id == run_id


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans=conversation_plans, asked=targets)
def test_no_query_target_or_run_id_reaches_another_conversation_or_tenant(plans, asked):
    async def scenario() -> None:
        with tempfile.TemporaryDirectory() as folder:
            store = await SqliteConversationStore.open(Path(folder) / 'isolation.db')
            try:
                world = await _build(store, plans)
                await _check(store, world, asked)
            finally:
                await store.close()

    asyncio.run(scenario())


HOSTILE_QUERIES = [
    'invoice OR 1=1',
    'refund NOT paris',
    'NEAR(invoice refund)',
    '"invoice',
    "invoice'; DROP TABLE entries; --",
    'col:invoice',
    'inv*',
    '(invoice',
    'ÉCOLE café naïve',
    '東京 請求書',
    '🧾 invoice 🧾',
    'invoice\trefund\r\n',
    'a' * 70 + ' invoice',
]


@pytest.mark.parametrize('query', HOSTILE_QUERIES, ids=range(len(HOSTILE_QUERIES)))
async def test_hostile_queries_return_results_never_errors(query: str, tmp_path: Path):
    store = await SqliteConversationStore.open(tmp_path / 'hostile.db')
    try:
        history = _turn('please refund invoice INV-7731 from the école in 東京', 'refund approved 🧾')
        await store.append(
            AppendRequest(
                conversation_id='c', scope=None, idempotency_key='k', base_length=0, base_hash=None, messages=history
            )
        )
        result = await search_history(store, SearchRequest(query=query, conversation_id='c'))
        assert isinstance(result.hits, list)
        if 'invoice' in query or 'refund' in query:
            assert result.hits, f'{query!r} should still find the literal words'
        entries = await store.load_entries('c')
        assert entries is not None and len(entries) == 2  # nothing stored was touched
    finally:
        await store.close()


@pytest.mark.parametrize(
    'query',
    ['', '   ', '\x00', 'invoice\x00refund', 'invoice\x07\x1b[31mrefund', '!!! ??? ...', 'x' * 1_048_576],
    ids=['empty', 'blank', 'nul', 'inner-nul', 'control-characters', 'punct', '1MB'],
)
async def test_unusable_queries_get_a_clear_message(query: str, tmp_path: Path):
    # Control characters (tab and line breaks aside) are refused up front, like an id holding them.
    store = await SqliteConversationStore.open(tmp_path / 'bad.db')
    try:
        with pytest.raises(InvalidQuery) as refused:
            await search_history(store, SearchRequest(query=query, conversation_id='c'))
        assert str(refused.value)
    finally:
        await store.close()


async def test_ten_thousand_term_query_is_truncated_not_refused(tmp_path: Path):
    store = await SqliteConversationStore.open(tmp_path / 'long.db')
    try:
        await store.append(
            AppendRequest(
                conversation_id='c',
                scope=None,
                idempotency_key='k',
                base_length=0,
                base_hash=None,
                messages=_turn('invoice 1', 'ok'),
            )
        )
        query = 'invoice ' + ' '.join(f'w{i}' for i in range(10_000))
        result = await search_history(store, SearchRequest(query=query, conversation_id='c'))
        assert result.truncated_query and result.hits
    finally:
        await store.close()
