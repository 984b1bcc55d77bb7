"""Joining ranked ids with rows into hits, merging context windows, and rendering for a model."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest
from pydantic_ai import messages as m

from temporal_recall.errors import InvalidSearchParameters
from temporal_recall.search import (
    CONTEXT_EXCERPT_WIDTH,
    EXCERPT_WIDTH,
    MAX_CONTEXT_LINES,
    MAX_LIMIT,
    ContextMessage,
    ScoredDocument,
    SearchHit,
    SearchResult,
    build_hits,
    render_for_model,
)
from temporal_recall.store.protocol import DocumentRow


def user(text: str) -> m.ModelRequest:
    return m.ModelRequest(parts=[m.UserPromptPart(text)])


def assistant(text: str) -> m.ModelResponse:
    return m.ModelResponse(parts=[m.TextPart(text)])


def conversation(length: int) -> dict[int, m.ModelMessage]:
    return {position: (user if position % 2 == 0 else assistant)(f'message {position}') for position in range(length)}


def row(
    doc_id: int,
    position: int,
    history: dict[int, m.ModelMessage],
    *,
    context: int = 0,
    conversation_id: str = 'conv',
) -> DocumentRow:
    neighbours = [
        (other, history[other])
        for other in range(position - context, position + context + 1)
        if other != position and other in history
    ]
    return DocumentRow(
        doc_id=doc_id,
        conversation_id=conversation_id,
        entry_id=f'{conversation_id}-entry-{position}',
        run_id='run-1',
        position=position,
        message=history[position],
        timestamp=datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC),
        neighbours=neighbours,
    )


def test_hits_follow_ranked_order_and_skip_documents_without_rows() -> None:
    history = conversation(10)
    ranked = [ScoredDocument(7, 3.0), ScoredDocument(99, 2.0), ScoredDocument(2, 1.0)]
    rows = [row(2, 2, history), row(7, 7, history)]

    hits = build_hits(ranked, rows, ['message'], context_lines=0)

    assert [(hit.position, hit.score, hit.role) for hit in hits] == [(7, 3.0, 'assistant'), (2, 1.0, 'user')]
    assert hits[0].entry_id == 'conv-entry-7'
    assert hits[0].run_id == 'run-1'
    assert hits[0].timestamp == datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
    assert hits[0].excerpt == 'message 7'
    assert hits[0].context == []


def test_hit_excerpt_is_centred_on_the_match() -> None:
    history: dict[int, m.ModelMessage] = {0: user('lorem ' * 2_000 + 'the invoice number is 4521 ' + 'ipsum ' * 2_000)}
    [hit] = build_hits([ScoredDocument(0, 1.0)], [row(0, 0, history)], ['invoice'], context_lines=0)
    assert 'the invoice number is 4521' in hit.excerpt
    assert len(hit.excerpt) <= EXCERPT_WIDTH


def test_context_is_bounded_by_context_lines() -> None:
    history = conversation(20)
    [hit] = build_hits([ScoredDocument(0, 1.0)], [row(0, 10, history, context=3)], ['x'], context_lines=2)
    assert [(neighbour.position, neighbour.role) for neighbour in hit.context] == [
        (8, 'user'),
        (9, 'assistant'),
        (11, 'assistant'),
        (12, 'user'),
    ]
    assert hit.context[0] == ContextMessage(position=8, role='user', excerpt='message 8')


def test_no_context_when_none_is_asked_for() -> None:
    history = conversation(20)
    [hit] = build_hits([ScoredDocument(0, 1.0)], [row(0, 10, history, context=3)], ['x'], context_lines=0)
    assert hit.context == []


def test_overlapping_context_windows_are_merged() -> None:
    history = conversation(20)
    ranked = [ScoredDocument(0, 2.0), ScoredDocument(1, 1.0)]
    rows = [row(0, 10, history, context=2), row(1, 12, history, context=2)]

    first, second = build_hits(ranked, rows, ['message'], context_lines=2)

    # 12 is a hit itself, so the first hit does not show it as context; 11 is shown once, by the better hit.
    assert [neighbour.position for neighbour in first.context] == [8, 9, 11]
    assert [neighbour.position for neighbour in second.context] == [13, 14]


def test_same_positions_in_different_conversations_are_not_merged() -> None:
    history = conversation(20)
    ranked = [ScoredDocument(0, 2.0), ScoredDocument(1, 1.0)]
    rows = [row(0, 10, history, context=1), row(1, 10, history, context=1, conversation_id='other')]
    first, second = build_hits(ranked, rows, ['message'], context_lines=1)
    assert [neighbour.position for neighbour in first.context] == [9, 11]
    assert [neighbour.position for neighbour in second.context] == [9, 11]


def test_context_leaves_out_messages_without_searchable_text() -> None:
    history = conversation(5)
    history[1] = m.ModelResponse(parts=[m.CompactionPart(content='summary of everything')])
    history[3] = m.ModelResponse(parts=[m.ThinkingPart('hmm')])
    [hit] = build_hits([ScoredDocument(0, 1.0)], [row(0, 2, history, context=1)], ['x'], context_lines=1)
    assert hit.context == []


def test_context_excerpts_are_clipped_and_centred() -> None:
    history = conversation(3)
    history[1] = assistant('blah ' * 1_000 + 'the refund was approved ' + 'blah ' * 1_000)
    [hit] = build_hits([ScoredDocument(0, 1.0)], [row(0, 0, history, context=1)], ['refund'], context_lines=1)
    [neighbour] = hit.context
    assert 'the refund was approved' in neighbour.excerpt
    assert len(neighbour.excerpt) <= CONTEXT_EXCERPT_WIDTH


def test_unsorted_neighbours_come_out_in_position_order() -> None:
    history = conversation(10)
    document = row(0, 5, history, context=2)
    shuffled = dataclasses.replace(document, neighbours=list(reversed(document.neighbours)))
    [hit] = build_hits([ScoredDocument(0, 1.0)], [shuffled], ['x'], context_lines=2)
    assert [neighbour.position for neighbour in hit.context] == [3, 4, 6, 7]


@pytest.mark.parametrize('context_lines', [-1, MAX_CONTEXT_LINES + 1, True])
def test_context_lines_out_of_range_is_refused(context_lines: int) -> None:
    with pytest.raises(InvalidSearchParameters, match='context_lines'):
        build_hits([], [], ['x'], context_lines=context_lines)


def _hit(position: int, *, score: float = 1.0, excerpt: str = 'text', conversation_id: str = 'conv') -> SearchHit:
    return SearchHit(
        score=score,
        conversation_id=conversation_id,
        run_id='run-7',
        entry_id=f'e{position}',
        position=position,
        role='user',
        excerpt=excerpt,
    )


def test_render_hits() -> None:
    hit = SearchHit(
        score=3.14159,
        conversation_id='conv',
        run_id='run-7',
        entry_id='e10',
        position=10,
        role='user',
        timestamp=datetime(2026, 3, 4, 5, 6, 7, 890, tzinfo=UTC),
        excerpt='where is invoice 4521?',
        context=[ContextMessage(position=11, role='assistant', excerpt='It was paid on Monday.')],
    )
    text = render_for_model(SearchResult(query='invoice 4521', hits=[hit, _hit(3, score=0.5)], searched_documents=40))
    assert text.splitlines() == [
        '2 earlier messages matched "invoice 4521" (best first):',
        '[1] position 10, user, run run-7, score 3.142, 2026-03-04T05:06:07+00:00',
        '  where is invoice 4521?',
        '    11 assistant: It was paid on Monday.',
        '[2] position 3, user, run run-7, score 0.500',
        '  text',
    ]


def test_render_names_conversations_when_there_are_several() -> None:
    text = render_for_model(SearchResult(query='q', hits=[_hit(1, conversation_id='a'), _hit(2, conversation_id='b')]))
    assert '[1] conversation a, position 1' in text
    assert '[2] conversation b, position 2' in text


def test_render_mentions_a_truncated_query() -> None:
    text = render_for_model(SearchResult(query='q', hits=[_hit(1)], truncated_query=True))
    assert 'too many distinct words' in text


def test_render_without_hits() -> None:
    text = render_for_model(SearchResult(query='invoice 4521', searched_documents=40))
    assert text.startswith('No earlier messages matched "invoice 4521"')
    assert '40' in text


def test_render_without_hits_gives_the_reason() -> None:
    reason = 'There is no conversation to search: this run has no conversation id.'
    assert render_for_model(SearchResult(query='invoice', message=reason)) == reason


def test_render_is_bounded() -> None:
    huge = 'word ' * 10_000
    hits = [
        SearchHit(
            score=1.0,
            conversation_id='conv',
            entry_id=f'e{index}',
            position=index,
            role='user',
            excerpt=huge,
            context=[ContextMessage(position=index + offset, role='assistant', excerpt=huge) for offset in range(20)],
        )
        for index in range(MAX_LIMIT + 50)
    ]
    text = render_for_model(SearchResult(query='q' * 1_000, hits=hits, message=huge))
    lines = text.splitlines()
    assert sum(line.startswith('[') for line in lines) == MAX_LIMIT
    assert max(len(line) for line in lines) <= 2 * EXCERPT_WIDTH + 10
    assert len(lines) <= 3 + MAX_LIMIT * (2 + 2 * MAX_CONTEXT_LINES)


def test_render_keeps_each_excerpt_on_one_line() -> None:
    text = render_for_model(SearchResult(query='q', hits=[_hit(1, excerpt='line one\nline two\n\nline three')]))
    assert '  line one line two line three' in text.splitlines()


def test_every_occurrence_of_a_document_is_a_hit_with_its_own_place_and_context() -> None:
    history = conversation(12)
    history[1] = history[9] = user('repeat this exactly')
    ranked = [ScoredDocument(5, 4.0), ScoredDocument(3, 2.0)]
    rows = [row(3, 4, history), row(5, 1, history, context=1), row(5, 9, history, context=1)]

    hits = build_hits(ranked, rows, ['repeat'], context_lines=1)

    assert [(hit.position, hit.score) for hit in hits] == [(1, 4.0), (9, 4.0), (4, 2.0)]
    assert [[neighbour.position for neighbour in hit.context] for hit in hits] == [[0, 2], [8, 10], []]
    assert hits[0].excerpt == hits[1].excerpt == 'repeat this exactly'
