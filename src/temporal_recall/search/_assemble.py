"""From ranked document ids and fetched rows to the hits a caller sees, and the text a model reads.

Kept apart from ranking because it needs the messages themselves, which a backend fetches only for
the few documents that made the cut.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from temporal_recall._search_terms import Arm
from temporal_recall.errors import InvalidSearchParameters
from temporal_recall.models import ContextMessage, SearchHit, SearchResult
from temporal_recall.search._bm25 import ScoredDocument
from temporal_recall.search._excerpt import excerpt
from temporal_recall.search._options import (
    CONTEXT_EXCERPT_WIDTH,
    EXCERPT_WIDTH,
    MAX_CONTEXT_LINES,
    MAX_LIMIT,
)
from temporal_recall.store.protocol import DocumentRow
from temporal_recall.text._documents import message_role, searchable_text, searchable_texts

__all__ = ('build_hits', 'render_for_model')


def build_hits(
    ranked: Sequence[ScoredDocument],
    rows: Sequence[DocumentRow],
    terms: Sequence[str],
    *,
    context_lines: int,
    found_by: Mapping[int, list[Arm]] | None = None,
) -> list[SearchHit]:
    """One hit per row, that is per occurrence of a ranked document, in ranked order.

    A document's occurrences (the same words said at several positions) are each a hit with the
    document's score, in the order `rows` gives them. A ranked document without a row is skipped:
    it left the searchable set (or the target) between ranking and fetching, and is reported as if
    it had never matched.

    Context is up to `context_lines` neighbours on each side of the hit, by position. Neighbours are
    shown once per result: a position that is itself a hit, or already appeared as context of a
    better hit, is left out, so overlapping windows merge instead of repeating. Positions are
    compared within one conversation. Neighbours with no searchable text (compaction summaries,
    thinking-only or image-only messages) are left out as they would show as blank lines.

    A hit shows its document's speaker and only that speaker's words (`DocumentRow.role`): the hit
    on a system prompt sent with the first user prompt shows the system prompt as `system`. A
    neighbour holding several speakers' words is a line per speaker.

    `found_by` says which rankings found each document (a search by meaning); by default, its words.
    """
    if isinstance(context_lines, bool) or not 0 <= context_lines <= MAX_CONTEXT_LINES:
        raise InvalidSearchParameters(
            f'context_lines={context_lines!r} is out of range: use 0 up to {MAX_CONTEXT_LINES}.'
        )
    by_id: dict[int, list[DocumentRow]] = {}
    for row in rows:
        by_id.setdefault(row.doc_id, []).append(row)
    found = [(scored, row) for scored in ranked for row in by_id.get(scored.doc_id, ())]
    shown: set[tuple[str, int]] = {(row.conversation_id, row.position) for _, row in found}

    hits: list[SearchHit] = []
    for scored, row in found:
        context = _context(row, terms, context_lines, shown) if context_lines else []
        hits.append(
            SearchHit(
                score=scored.score,
                conversation_id=row.conversation_id,
                run_id=row.run_id,
                entry_id=row.entry_id,
                position=row.position,
                role=row.role or message_role(row.message),
                timestamp=row.timestamp,
                excerpt=excerpt(searchable_text(row.message, role=row.role), terms, width=EXCERPT_WIDTH),
                context=context,
                **({} if found_by is None else {'found_by': found_by.get(scored.doc_id, ['bm25'])}),
            )
        )
    return hits


def _context(
    row: DocumentRow, terms: Sequence[str], context_lines: int, shown: set[tuple[str, int]]
) -> list[ContextMessage]:
    """The neighbours of `row` within `context_lines` not yet `shown` (which it adds them to), a line per speaker."""
    context: list[ContextMessage] = []
    for position, message in sorted(row.neighbours, key=lambda neighbour: neighbour[0]):
        key = (row.conversation_id, position)
        if abs(position - row.position) > context_lines or key in shown:
            continue
        spoken = searchable_texts(message)
        if not spoken:
            continue
        shown.add(key)
        context.extend(
            ContextMessage(position=position, role=role, excerpt=excerpt(text, terms, width=CONTEXT_EXCERPT_WIDTH))
            for role, text in spoken
        )
    return context


_MESSAGE_WIDTH = 2 * EXCERPT_WIDTH
"""Room for an explanatory `SearchResult.message`, which the product writes and keeps short."""


def _line(text: str, width: int) -> str:
    # Re-clip: a result may have been built by other code, and one line per message keeps it readable.
    return excerpt(text, (), width=width)


def render_for_model(result: SearchResult) -> str:
    """The result as compact plain text for a model to read.

    At most `MAX_LIMIT` hits, `2 * MAX_CONTEXT_LINES` context lines per hit and the documented
    excerpt widths, whatever the result holds, so the text stays bounded.
    """
    query = _line(result.query, EXCERPT_WIDTH)
    if not result.hits:
        if result.message:
            return _line(result.message, _MESSAGE_WIDTH)
        return (
            f'No earlier messages matched "{query}" '
            f'({result.searched_documents} searchable messages looked at). Try other or fewer words.'
        )

    hits = result.hits[:MAX_LIMIT]
    conversations = {hit.conversation_id for hit in hits}
    plural = '' if len(hits) == 1 else 's'
    lines = [f'{len(hits)} earlier message{plural} matched "{query}" (best first):']
    if result.truncated_query:
        lines.append('(The query had too many distinct words; only the first ones were searched.)')
    if result.message:
        lines.append(_line(result.message, _MESSAGE_WIDTH))
    for number, hit in enumerate(hits, start=1):
        details = [f'position {hit.position}', hit.role, f'run {hit.run_id or "-"}', f'score {hit.score:.3f}']
        if len(conversations) > 1:
            details.insert(0, f'conversation {hit.conversation_id}')
        if hit.timestamp is not None:
            details.append(hit.timestamp.isoformat(timespec='seconds'))
        lines.append(f'[{number}] ' + ', '.join(details))
        lines.append(f'  {_line(hit.excerpt, EXCERPT_WIDTH)}')
        for neighbour in hit.context[: 2 * MAX_CONTEXT_LINES]:
            lines.append(
                f'    {neighbour.position} {neighbour.role}: {_line(neighbour.excerpt, CONTEXT_EXCERPT_WIDTH)}'
            )
    return '\n'.join(lines)
