"""A hit's context stays on the searched conversation's own chain, whoever else built on its entries.

Forks share the entries they were forked from and append children to them, in the same scope or in
another tenant's. Before the fix, the context after a hit followed the only child of an entry
whichever conversation it belonged to, and messages saved without a run id all matched each other,
so a tenant's search showed another tenant's later messages.
"""

from __future__ import annotations

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from temporal_recall.models import SearchRequest
from temporal_recall.search import SearchResult
from temporal_recall.search.plan import search_index

from ._support import AnyStore, append_after


def _turn(question: str, answer: str) -> list[ModelMessage]:
    return [ModelRequest(parts=[UserPromptPart(question)]), ModelResponse(parts=[TextPart(answer)])]


def _shown(result: SearchResult) -> str:
    """Every text a result shows: hits and their context."""
    return result.model_dump_json()


@pytest.mark.parametrize('fork_scope', ['globex', 'acme'], ids=['cross-scope', 'same-scope'])
async def test_a_forks_later_messages_never_appear_in_the_originals_context(recall_store: AnyStore, fork_scope: str):
    history = await append_after(recall_store, 'a1', 'acme', [], _turn('where is invoice 1042', 'it shipped on monday'))
    await recall_store.fork('a1', new_conversation_id='g', scope=fork_scope, source_scope='acme')
    await append_after(recall_store, 'g', fork_scope, history, _turn('GLOBEXSECRET question', 'GLOBEXSECRET answer'))

    for query in ['shipped monday', 'invoice 1042']:
        result = await search_index(
            recall_store, SearchRequest(query=query, conversation_id='a1', scope='acme', context_lines=1)
        )
        assert result.hits, query
        assert 'GLOBEXSECRET' not in _shown(result)
        scope_wide = await search_index(
            recall_store, SearchRequest(query=query, all_conversations=True, scope='acme', context_lines=3)
        )
        assert scope_wide.hits
        assert 'GLOBEXSECRET' not in _shown(scope_wide)

    # The fork itself still sees its own continuation as context.
    own = await search_index(
        recall_store, SearchRequest(query='shipped monday', conversation_id='g', scope=fork_scope, context_lines=1)
    )
    assert 'GLOBEXSECRET question' in _shown(own)


async def test_context_follows_the_conversations_own_continuation_not_a_forks(recall_store: AnyStore):
    history = await append_after(recall_store, 'a1', 'acme', [], _turn('where is invoice 1042', 'it shipped on monday'))
    await recall_store.fork('a1', new_conversation_id='g', scope='acme', source_scope='acme')
    # The fork writes first, so its message is the earliest child of the shared entry.
    await append_after(recall_store, 'g', 'acme', history, _turn('FORKONLY question', 'FORKONLY answer'))
    await append_after(recall_store, 'a1', 'acme', history, _turn('original continues', 'ORIGINALNEXT answer'))

    result = await search_index(
        recall_store, SearchRequest(query='shipped monday', conversation_id='a1', scope='acme', context_lines=2)
    )
    shown = _shown(result)
    assert 'FORKONLY' not in shown
    assert 'original continues' in shown


async def test_a_branch_of_another_scope_never_appears_through_a_shared_ancestor(recall_store: AnyStore):
    # globex forks part-way and rewrites from there: the shared entry then has children in both scopes.
    history = await append_after(recall_store, 'a1', 'acme', [], _turn('where is invoice 1042', 'it shipped on monday'))
    history = await append_after(recall_store, 'a1', 'acme', history, _turn('thanks a lot', 'you are welcome'))
    await recall_store.fork('a1', new_conversation_id='g', scope='globex', source_scope='acme', at=1)
    await append_after(
        recall_store, 'g', 'globex', history[:1], [ModelResponse(parts=[TextPart('GLOBEXSECRET reply')])]
    )

    for scope, conversation in [('acme', 'a1'), ('globex', 'g')]:
        result = await search_index(
            recall_store,
            SearchRequest(query='invoice 1042', conversation_id=conversation, scope=scope, context_lines=3),
        )
        assert result.hits
        shown = _shown(result)
        assert ('GLOBEXSECRET' in shown) == (scope == 'globex')
        assert ('shipped on monday' in shown) == (scope == 'acme')


async def test_context_at_a_branch_point_follows_the_chain_the_hit_is_on(recall_store: AnyStore):
    history = await append_after(recall_store, 'a1', 'acme', [], _turn('where is invoice 1042', 'it shipped on monday'))
    old = await append_after(recall_store, 'a1', 'acme', history, _turn('OLDBRANCH question', 'OLDBRANCH answer'))
    # Rewritten after the first turn: the old continuation stays as a kept branch of the same conversation.
    await append_after(recall_store, 'a1', 'acme', history, _turn('NEWHEAD question', 'NEWHEAD answer'))
    record = await recall_store.read_record('a1')
    assert record is not None and record.branches

    at_branch_point = await search_index(
        recall_store, SearchRequest(query='shipped monday', conversation_id='a1', scope='acme', context_lines=2)
    )
    shown = _shown(at_branch_point)
    assert 'NEWHEAD question' in shown  # the head's chain first
    assert 'OLDBRANCH' not in shown

    # The kept branch is still what the conversation said: a hit there shows that branch's own neighbours.
    current = SearchRequest(query='OLDBRANCH', conversation_id='a1', scope='acme', context_lines=1, limit=1)
    on_old_branch = await search_index(recall_store, current)
    assert [hit.position for hit in on_old_branch.hits] == [len(old) - 2]
    assert 'OLDBRANCH answer' in _shown(on_old_branch)  # the kept branch's own continuation
    assert 'NEWHEAD' not in _shown(on_old_branch)
