"""Search isolation and hostile queries, through the same `search_index` every entry point uses.

The isolation test is property-based, on both backends: generated tenants, conversations, runs
(and messages saved without one), forks within and across scopes that carry on from the entries
they share, branches, queries, targets and context windows. Whatever is asked, no hit may come from
another conversation (for a conversation target) or another tenant scope, no message shown as a
hit's context may come from outside the hit's own conversation, and a conversation outside the
caller's scope must look exactly like one that does not exist.
"""

from __future__ import annotations

import asyncio
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from temporal_recall.content import content_hash
from temporal_recall.errors import InvalidQuery, UnknownConversation
from temporal_recall.models import MAX_QUERY_ECHO_CHARS, SearchRequest
from temporal_recall.search import transcript_text
from temporal_recall.search.plan import search_index
from temporal_recall.store import AppendRequest, SqliteConversationStore

from ..store._support import AnyStore, open_site

WORDS = ['alpha', 'beta', 'gamma', 'delta', 'invoice', 'refund', 'paris', 'order', 'a1042', 'secret']
SCOPES = ['acme', 'globex', None]


@dataclass
class World:
    """What was written, to check every answer against."""

    scope_of: dict[str, str | None] = field(default_factory=dict[str, str | None])
    texts_of: dict[str, set[str]] = field(default_factory=dict[str, set[str]])
    tags_of: dict[str, set[str]] = field(default_factory=dict[str, set[str]])
    """Per conversation, the tag of every message in its history (its own, its branches, what it forked)."""
    next_tag: int = 0

    def tag(self) -> str:
        """A marker unique to one message, so every text a result shows can be traced to its writer."""
        self.next_tag += 1
        return f'm{self.next_tag}x'


def _turn(text: str, answer: str) -> list[ModelMessage]:
    return [ModelRequest(parts=[UserPromptPart(text)]), ModelResponse(parts=[TextPart(answer)])]


Turn = tuple[list[str], list[str], str | None]
Plan = tuple[str | None, list[Turn], str, int | None, list[Turn], bool]
"""Scope, turns, twist, where a fork starts, what is said after the fork, whether the original carries on."""
Ask = tuple[list[str], str | None, int, str | None, int]
"""Query words, scope, conversation index (-1 for all), run id, context lines."""

TAG = re.compile(r'\bm\d+x\b')

turns = st.lists(
    st.tuples(
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
        st.sampled_from([None, 'run-0', 'run-1']),  # None: saved without a run id
    ),
    min_size=1,
    max_size=4,
)

conversation_plans = st.lists(
    st.tuples(
        st.sampled_from(SCOPES),
        turns,
        st.sampled_from(['none', 'fork-same', 'fork-other', 'branch']),
        st.sampled_from([None, 1, 2]),  # where a fork starts; None forks the whole history
        turns,  # what the fork, or the original after its fork, says next
        st.booleans(),  # whether the original also carries on after being forked
    ),
    min_size=2,
    max_size=5,
)

targets = st.lists(
    st.tuples(
        st.lists(st.sampled_from([*WORDS, 'OR', 'NOT', '*', '"x"']), min_size=1, max_size=3),
        st.sampled_from(SCOPES),
        st.integers(min_value=-1, max_value=9),  # conversation index; -1 means `all`
        st.sampled_from([None, 'run-0', 'run-1', 'run-x']),
        st.integers(min_value=0, max_value=3),  # context lines
    ),
    min_size=1,
    max_size=8,
)


async def _say(
    store: AnyStore,
    world: World,
    conversation_id: str,
    history: list[ModelMessage],
    said_turns: list[tuple[list[str], list[str], str | None]],
) -> list[ModelMessage]:
    """Append each turn after `history` (tagged, with its run id or none), recording it in the world."""
    for said, answered, run_id in said_turns:
        messages = _turn(f'{world.tag()} ' + ' '.join(said), f'{world.tag()} ' + ' '.join(answered))
        await store.append(
            AppendRequest(
                conversation_id=conversation_id,
                scope=world.scope_of[conversation_id],
                idempotency_key=f'{conversation_id}/{len(history)}/{world.next_tag}',
                base_length=len(history),
                base_hash=content_hash(history[-1]) if history else None,
                messages=messages,
                run_id=run_id,
            )
        )
        history = [*history, *messages]
        _record(world, conversation_id, messages)
    return history


def _record(world: World, conversation_id: str, messages: list[ModelMessage]) -> None:
    world.texts_of.setdefault(conversation_id, set()).update(content_hash(m) for m in messages)
    world.tags_of.setdefault(conversation_id, set()).update(TAG.findall(' '.join(map(transcript_text, messages))))


async def _build(store: AnyStore, plans: list[Plan]) -> World:
    world = World()
    for number, (scope, said_turns, twist, fork_at, later_turns, original_continues) in enumerate(plans):
        conversation_id = f'conv-{number}'
        world.scope_of[conversation_id] = scope
        history = await _say(store, world, conversation_id, [], said_turns)
        if twist == 'branch' and len(history) > 2:
            # A rewritten history: the old branch stays part of the conversation (and findable).
            await _say(store, world, conversation_id, history[:2], [(['rewrote', 'refund'], ['rewritten'], 'run-1')])
        elif twist.startswith('fork'):
            fork_scope = scope if twist == 'fork-same' else ('globex' if scope != 'globex' else 'acme')
            fork_id = f'conv-{number}-fork'
            kept = history if fork_at is None else history[:fork_at]
            await store.fork(
                conversation_id, new_conversation_id=fork_id, scope=fork_scope, source_scope=scope, at=fork_at
            )
            world.scope_of[fork_id] = fork_scope
            _record(world, fork_id, kept)
            # The fork carries on from a shared entry: its messages are that entry's children too.
            await _say(store, world, fork_id, kept, later_turns)
            if original_continues:
                await _say(store, world, conversation_id, history, later_turns[:1])
    return world


async def _check(store: AnyStore, world: World, asked: list[Ask]) -> None:
    conversations = sorted(world.scope_of)
    for words, scope, index, run_id, context_lines in asked:
        everything = index < 0 or index >= len(conversations)
        conversation_id = None if everything else conversations[index]
        request = SearchRequest(
            query=' '.join(words),
            conversation_id=conversation_id,
            all_conversations=everything,
            scope=scope,
            run_id=run_id,
            limit=100,
            context_lines=context_lines,
        )
        if not re.search(r'\w', ' '.join(words)):
            with pytest.raises(InvalidQuery):
                await search_index(store, request)
            continue
        if conversation_id is not None and world.scope_of[conversation_id] != scope:
            # Out of scope answers exactly like a conversation that does not exist.
            with pytest.raises(UnknownConversation) as outside:
                await search_index(store, request)
            with pytest.raises(UnknownConversation) as missing:
                await search_index(store, request.model_copy(update={'conversation_id': 'conv-never'}))
            assert str(outside.value).replace(conversation_id, '?') == str(missing.value).replace('conv-never', '?')
            continue
        try:
            result = await search_index(store, request)
        except UnknownConversation as error:
            raise AssertionError(f'{request!r} refused an in-scope conversation; world={world!r}') from error
        allowed = [c for c in conversations if world.scope_of[c] == scope if everything or c == conversation_id]
        allowed_hashes = set[str]().union(*(world.texts_of[c] for c in allowed))
        for hit in result.hits:
            assert hit.conversation_id in allowed
            assert world.scope_of[hit.conversation_id] == scope
            entry = await store.read_entry(hit.entry_id)
            assert content_hash(entry.message) in allowed_hashes
            if run_id is not None:
                assert hit.run_id == run_id
            # Every message shown, hit or context, is one of the hit's own conversation.
            own = world.tags_of[hit.conversation_id]
            shown = TAG.findall(' '.join([hit.excerpt, *(line.excerpt for line in hit.context)]))
            assert len(shown) == 1 + len(hit.context), f'an excerpt lost its tag: {hit!r}'
            foreign = set(shown) - own
            assert not foreign, f'{request!r} showed {foreign} from outside {hit.conversation_id}: {hit!r}'


def _sweep(world: World) -> list[Ask]:
    """Targets that show every message with the widest context: each conversation in its own scope, and
    each scope as a whole. Whatever the generated targets happen to ask, every hit's context is checked."""
    conversations = sorted(world.scope_of)
    asked: list[Ask] = [(WORDS, world.scope_of[c], index, None, 3) for index, c in enumerate(conversations)]
    return asked + [(WORDS, scope, -1, None, 3) for scope in SCOPES]


BACKENDS = [pytest.param('sqlite'), pytest.param('postgres', marks=pytest.mark.postgres)]


@pytest.mark.parametrize('backend', BACKENDS)
@settings(max_examples=25)
@given(plans=conversation_plans, asked=targets)
def test_no_query_target_or_run_id_reaches_another_conversation_or_tenant(
    backend: str, plans: list[Plan], asked: list[Ask]
):
    async def scenario() -> None:
        with tempfile.TemporaryDirectory() as folder:
            async with open_site(backend, Path(folder)) as site:
                store = await site.open()
                try:
                    world = await _build(store, plans)
                    report = await store.check()  # whatever was built, `recall check` finds it whole
                    assert report.clean, '\n'.join(map(str, report.findings))
                    await _check(store, world, [*asked, *_sweep(world)])
                finally:
                    await store.close()

    asyncio.run(scenario())


HOSTILE_QUERIES = [
    ('invoice OR 1=1', [0]),
    ('refund NOT paris', [1, 0]),  # operators are words: "not" and "paris" are simply absent
    ('NEAR(invoice refund)', [0, 1]),
    ('"invoice', [0]),
    ("invoice'; DROP TABLE entries; --", [0]),
    ('col:invoice', [0]),
    ('inv*', [0]),  # no prefix search: "inv" is a word of INV-7731
    ('(invoice', [0]),
    ('ÉCOLE café naïve', [0]),
    ('東京 請求書', [0]),
    ('🧾 invoice 🧾', [0]),
    ('invoice\trefund\r\n', [0, 1]),
    ('a' * 70 + ' invoice', [0]),
]
"""Queries full of what a query language or SQL would read as syntax, and the positions they find, best first:
the prompt (0) holds invoice, INV-7731, école and 東京; the answer (1) holds refund and 🧾."""


@pytest.mark.parametrize(('query', 'positions'), HOSTILE_QUERIES, ids=range(len(HOSTILE_QUERIES)))
async def test_hostile_queries_return_results_never_errors(query: str, positions: list[int], tmp_path: Path):
    store = await SqliteConversationStore.open(tmp_path / 'hostile.db')
    try:
        history = _turn('please refund invoice INV-7731 from the école in 東京', 'refund approved 🧾')
        await store.append(
            AppendRequest(
                conversation_id='c', scope=None, idempotency_key='k', base_length=0, base_hash=None, messages=history
            )
        )
        result = await search_index(store, SearchRequest(query=query, conversation_id='c'))
        assert [hit.position for hit in result.hits] == positions, f'{query!r} should find its literal words'
        entries = await store.load_entries('c')
        assert entries is not None and len(entries) == 2  # nothing stored was touched
    finally:
        await store.close()


EMPTY = 'The query is empty or only whitespace.'
CONTROL = 'The query {} holds the control character U+{:04X} at position {}; search for printable text.'


@pytest.mark.parametrize(
    ('query', 'message'),
    [
        ('', EMPTY),
        ('   ', EMPTY),
        ('\x00', CONTROL.format(repr('\x00'), 0, 0)),
        ('invoice\x00refund', CONTROL.format(repr('invoice\x00refund'), 0, 7)),
        ('invoice\x07\x1b[31mrefund', CONTROL.format(repr('invoice\x07\x1b[31mrefund'), 7, 7)),
        ('!!! ??? ...', 'The query has no words in it, only punctuation or symbols'),
        ('x' * 1_048_576, 'The query is 1,048,576 characters long; the limit is 65,536.'),
    ],
    ids=['empty', 'blank', 'nul', 'inner-nul', 'control-characters', 'punct', '1MB'],
)
async def test_unusable_queries_get_a_clear_message(query: str, message: str, tmp_path: Path):
    # Control characters (tab and line breaks aside) are refused up front, like an id holding them.
    store = await SqliteConversationStore.open(tmp_path / 'bad.db')
    try:
        with pytest.raises(InvalidQuery) as refused:
            await search_index(store, SearchRequest(query=query, conversation_id='c'))
        assert str(refused.value).startswith(message)
    finally:
        await store.close()


async def _one_turn(path: Path) -> SqliteConversationStore:
    """A store at `path` holding conversation `c`: 'invoice 1', answered 'ok'."""
    store = await SqliteConversationStore.open(path)
    request = AppendRequest(
        conversation_id='c',
        scope=None,
        idempotency_key='k',
        base_length=0,
        base_hash=None,
        messages=_turn('invoice 1', 'ok'),
    )
    try:
        await store.append(request)
    except BaseException:
        await store.close()
        raise
    return store


async def test_ten_thousand_term_query_is_truncated_not_refused(tmp_path: Path):
    store = await _one_turn(tmp_path / 'long.db')
    try:
        query = 'invoice ' + ' '.join(f'w{i}' for i in range(10_000))
        result = await search_index(store, SearchRequest(query=query, conversation_id='c'))
        assert result.truncated_query
        assert [hit.position for hit in result.hits] == [0]  # 'invoice 1', found by the query's first term
    finally:
        await store.close()


async def test_a_long_query_is_echoed_cut_and_marked_as_cut(tmp_path: Path):
    store = await _one_turn(tmp_path / 'echo.db')
    try:
        query = 'invoice ' + 'x' * 500
        result = await search_index(store, SearchRequest(query=query, conversation_id='c'))
        assert result.query == query[: MAX_QUERY_ECHO_CHARS - 1] + '…'
        short = await search_index(store, SearchRequest(query='invoice', conversation_id='c'))
        assert short.query == 'invoice'
    finally:
        await store.close()
