"""Where a matching document was said: the occurrences of each hit, by the one rule both backends use.

The index holds one document per distinct content and tenant, and a conversation's membership row
remembers where the content first appeared, plus how many of the conversation's entries hold it
(`conversation_documents.occurrences`, kept at write time). A search expands its page at result
time, so writes stay as cheap as they were:

- A document held by one entry of the conversation is found there, its membership row.
- A document held by several is found at each entry of the conversation's current history (the
  chain that ends at its head) that holds it, earliest position first. Copies of one message that
  live elsewhere are not occurrences: a message Temporal re-instantiated or a later run re-sent is
  one entry already; a history rewritten at some position (a compaction, a trim) leaves the old
  branch behind, and its copies of messages the new history repeats are not shown again.
- A document the current history does not hold (said only on a branch the conversation moved away
  from) is found once, where it first appeared, as before.

Entries holding the content are found by walking up from the conversation's own head, so only its
own history is read, whatever other conversations or tenants hold the same content. A fork shares
its entries with the conversation it came from: in a search across conversations, an entry is one
hit, shown in the conversation where the document first appeared.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

__all__ = ('ChainQuery', 'page_rows')

ChainQuery = Callable[[int, Sequence[bytes]], Awaitable[Iterable[Sequence[Any]]]]
"""`(conv_key, content hashes) -> rows of (content_hash, entry_key, position, run_key, run_id, entry_id,
message JSON)`: the indexed entries of the conversation's current history (walked up from its head)
that hold one of those contents, in any order."""

Row = Sequence[Any]


async def page_rows(
    doc_ids: Sequence[int],
    rows: Sequence[Row],
    chain: ChainQuery,
    *,
    run_key: int | None = None,
    exclude_run_id: str | None = None,
    limit: int | None = None,
) -> list[Row]:
    """The occurrences of the wanted documents that make the page, one row each.

    `rows` are the backend's membership rows for `doc_ids`, in first-appearance order: `(doc_id,
    entry_key, position, run_key, run_id, entry_id, message JSON, conversation_id, conv_key,
    occurrences, content_hash)`. The result has their first nine columns, one row per occurrence:
    documents in `doc_ids` order (best first), each document's occurrences in the order of its
    membership rows and then by position, an entry at most once, none said in `exclude_run_id`, at
    most `limit` of them. With `run_key` (a run-filtered search), only occurrences said in that run.
    A conversation's history is walked at most once, and only when the page reaches one of its
    repeated documents.
    """
    repeated: dict[int, set[bytes]] = {}
    by_doc: dict[int, list[Row]] = {}
    for row in rows:
        by_doc.setdefault(int(row[0]), []).append(row)
        if int(row[9]) > 1:
            repeated.setdefault(int(row[8]), set()).add(bytes(row[10]))
    walked: dict[int, dict[bytes, list[Row]]] = {}

    async def occurrences(row: Row) -> list[Row]:
        conv_key = int(row[8])
        if conv_key in repeated and conv_key not in walked:
            held: dict[bytes, list[Row]] = {}
            for found in await chain(conv_key, sorted(repeated[conv_key])):
                if run_key is None or found[3] == run_key:
                    held.setdefault(bytes(found[0]), []).append(found)
            walked[conv_key] = held
        found = walked.get(conv_key, {}).get(bytes(row[10])) if int(row[9]) > 1 else None
        if not found:
            return [tuple(row[:9])]
        return [
            (row[0], entry_key, position, entry_run, run_id, entry_id, message, row[7], row[8])
            for _, entry_key, position, entry_run, run_id, entry_id, message in sorted(found, key=lambda f: int(f[2]))
        ]

    page: list[Row] = []
    shown: set[int] = set()
    for doc_id in dict.fromkeys(int(doc_id) for doc_id in doc_ids):
        for row in by_doc.get(doc_id, ()):
            for occurrence in await occurrences(row):
                if exclude_run_id is not None and occurrence[4] == exclude_run_id:
                    continue
                if int(occurrence[1]) in shown:
                    continue
                shown.add(int(occurrence[1]))
                page.append(occurrence)
                if limit is not None and len(page) >= limit:
                    return page
    return page
