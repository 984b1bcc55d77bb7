"""The page of a ranking: widening it until `limit` occurrences outside an excluded run are found.

One loop for every search mode (words, meaning, both), so the rule for gaps is written once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from temporal_recall.search._bm25 import ScoredDocument
from temporal_recall.search._options import SearchOptions
from temporal_recall.store.protocol import DocumentRow, IndexReader, SearchTarget

__all__ = ('Ranking', 'fill_page')


Ranking = Callable[[int], Awaitable[tuple[Sequence[ScoredDocument], bool]]]
"""`rank(fetch)`: the best `fetch` documents, and whether the ranking has no more beyond them."""


async def fill_page(
    reader: IndexReader,
    target: SearchTarget,
    rank: Ranking,
    options: SearchOptions,
    *,
    exclude_run_id: str | None,
) -> tuple[list[ScoredDocument], list[DocumentRow]]:
    """The page of a ranking: its rows (one per occurrence, documents in ranked order, `options.limit`
    counting occurrences, with `options.context_lines` around each), and the ranked documents that
    kept a row, in order.

    Occurrences `exclude_run_id` leaves out make gaps: the ranking is widened (four times deeper each
    time) until the page is full or the ranking has nothing more. One rule for every search mode.
    """
    limit = options.limit
    fetch = limit
    while True:
        ranked, exhausted = await rank(fetch)
        ranked = ranked[:fetch]
        rows = await reader.documents(
            target,
            [scored.doc_id for scored in ranked],
            context=options.context_lines,
            limit=limit,
            exclude_run_id=exclude_run_id,
        )
        if len(rows) >= limit or exhausted:
            break
        fetch *= 4
    kept = {row.doc_id for row in rows}
    return [scored for scored in ranked if scored.doc_id in kept], rows
