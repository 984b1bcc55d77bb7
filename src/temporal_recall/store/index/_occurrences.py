"""Where a matching document was said: the occurrences of each hit, by the one rule both backends use.
More in docs/design/store.md.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from ..sql._keys import run_id_of
from ..sql._session import Dialect, Session

__all__ = ('page_rows',)

Row = Sequence[Any]


@functools.lru_cache(maxsize=4)
def _chain_sql(dialect: Dialect) -> str:
    """The indexed entries of conversation `$1`'s current history (walked up from its head) holding the
    content of one of the documents `$2`: rows of `(content_hash, entry_key, position, run_key, run_id,
    entry_id, message JSON)`, in any order.

    The walk must drive, the contents being only a filter on the entries it reaches: SQLite would
    otherwise probe entries by hash (`CROSS JOIN` fixes its order), and PostgreSQL would join the
    contents' subquery and scan the entries for them (`ARRAY(...)` makes it a value computed once).
    """
    contents = f'SELECT d.content_hash FROM documents d WHERE d.doc_id {dialect.in_array(2, "bigint")}'  # noqa: S608
    return f"""
WITH RECURSIVE chain(k) AS (
    SELECT head_key FROM conversations WHERE conv_key = $1 AND head_key IS NOT NULL
    UNION ALL
    SELECT e.parent_key FROM chain JOIN entries e ON e.entry_key = chain.k WHERE e.parent_key IS NOT NULL
)
SELECT e.content_hash, e.entry_key, e.position, e.run_key, {run_id_of('e.run_key')}, e.entry_id, e.message
FROM chain {dialect.join_in_order} entries e ON e.entry_key = chain.k
WHERE NOT e.unindexed AND e.content_hash {dialect.in_select(contents)}
"""  # noqa: S608 (constant SQL fragments only; values are parameters)


async def page_rows(
    session: Session,
    doc_ids: Sequence[int],
    rows: Sequence[Row],
    *,
    run_id: str | None = None,
    exclude_run_id: str | None = None,
    limit: int | None = None,
) -> list[Row]:
    """The occurrences of the wanted documents that make the page, one row each.

    `rows` are the membership rows for `doc_ids` (`index._reader.documents`), in first-appearance order: `(doc_id,
    entry_key, position, run_key, run_id, entry_id, message JSON, conversation_id, conv_key,
    occurrences, content_hash)`. The result has their first nine columns, one row per occurrence:
    documents in `doc_ids` order (best first), each document's occurrences in the order of its
    membership rows and then by position, an entry at most once per document (an entry holds one
    document per speaker), none said in `exclude_run_id`, at most `limit` of them. With `run_id` (a
    run-filtered search), only occurrences said in that run. A conversation's history is walked at
    most once, and only when the page reaches one of its repeated documents.
    """
    repeated: dict[int, set[int]] = {}
    """The documents held by several of a conversation's entries, by conversation key."""
    by_doc: dict[int, list[Row]] = {}
    for row in rows:
        by_doc.setdefault(int(row[0]), []).append(row)
        if int(row[9]) > 1:
            repeated.setdefault(int(row[8]), set()).add(int(row[0]))
    walked: dict[int, dict[bytes, list[Row]]] = {}

    async def occurrences(row: Row) -> list[Row]:
        conv_key = int(row[8])
        if conv_key in repeated and conv_key not in walked:
            held: dict[bytes, list[Row]] = {}
            docs = session.dialect.array(sorted(repeated[conv_key]))
            for found in await session.rows(_chain_sql(session.dialect), conv_key, docs):
                if run_id is None or found[4] == run_id:
                    held.setdefault(bytes(found[0]), []).append(found)
            walked[conv_key] = held
        found = walked.get(conv_key, {}).get(bytes(row[10])) if int(row[9]) > 1 else None
        if not found:  # Said once, or only on a branch the conversation left: where it was first said.
            return [tuple(row[:9])] if run_id is None or row[4] == run_id else []
        return [
            (row[0], entry_key, position, entry_run, run_id, entry_id, message, row[7], row[8])
            for _, entry_key, position, entry_run, run_id, entry_id, message in sorted(found, key=lambda f: int(f[2]))
        ]

    page: list[Row] = []
    shown: set[tuple[int, int]] = set()
    for doc_id in dict.fromkeys(int(doc_id) for doc_id in doc_ids):
        for row in by_doc.get(doc_id, ()):
            for occurrence in await occurrences(row):
                if exclude_run_id is not None and occurrence[4] == exclude_run_id:
                    continue
                if (int(occurrence[1]), doc_id) in shown:
                    continue
                shown.add((int(occurrence[1]), doc_id))
                page.append(occurrence)
                if limit is not None and len(page) >= limit:
                    return page
    return page
