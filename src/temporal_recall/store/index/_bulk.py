"""Indexing a batch of many membership events at once: the bulk path of a rebuild, on any backend.
More in docs/design/store.md ("Bulk reindex").

`add_members` indexes one conversation's new members, a handful of statements each time; a rebuild
calling it once per run of one conversation's events pays those statements, a segment and its merge
per conversation. `index_events` takes thousands of events of any conversations and tenants and
writes the same rows with a fixed number of set-oriented statements: the documents in one insert,
their terms interned at once, their postings straight into merged blocks (no segment), the tenants'
and terms' counters and the conversations' counters updated once each.

It must give exactly what `add_members` gives when called on each run of consecutive events of one
conversation, in order, which the rebuild's exactness tests hold: a content's documents are created
by its first event in the tenant and numbered by that event's entry (`document_id`), an id another
tenant holds is refused and allocated instead, in event order; a document joins a conversation at
its first event there and counts every event of the conversation holding it (`occurrences`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from temporal_recall.content import load_message

from ..postings._segments import add_to_blocks
from ..postings._writes import KnownTails, NewPostings
from ..sql._bulk import CHUNK, allocate_keys, insert_returning, insert_rows, intern, run_batch, select_batch
from ..sql._session import Session
from ._documents import DOCUMENT_COLUMNS, MEMBER_COLUMNS, documents_of_contents
from ._terms import Member, document_id, encode_term_id_arrays, index_documents

__all__ = ('Analysed', 'Event', 'Rebuilding', 'analyse_messages', 'first_members', 'index_events', 'stored_messages')


@dataclass(frozen=True)
class Event:
    """Entry `member` joined conversation `conv_key` of tenant `tenant_id`: one membership event."""

    conv_key: int
    tenant_id: int
    member: Member


@dataclass(frozen=True)
class Analysed:
    """The documents (`index_documents`) of many stored messages, laid out as arrays over the batch's own
    vocabulary: what `_create` reads, and what a rebuild's analysis process sends back (`index._ahead`).

    Why arrays: a rebuild's batch holds millions of (document, term) pairs, and a Python step per pair
    (looking up its term's id, encoding its document's term list, laying out its postings) dominated
    the batch; over arrays each is one vector operation, and the layout pickles in a few milliseconds.
    """

    words: list[str]
    """Every word of the batch once, in the order they first appear."""
    documents: dict[int, list[tuple[str, int, int, int]]]
    """Each entry's documents, in `index_documents` order: `(role, length, start, end)`, `start:end`
    being the document's span of `terms` and `counts`."""
    terms: NDArray[np.int64]
    """The documents' words (indexes into `words`), each document's in its `frequencies` order."""
    counts: NDArray[np.int64]
    """The frequency of each of `terms` in its document."""


_Document = tuple[int, int, str]
"""`(doc_id, length, role)`."""

_Content = tuple[int, bytes]
"""`(tenant_id, content_hash)`: the key of a content's documents."""

_PAIR = (('conv_key', 'bigint'), ('doc_id', 'bigint'))


@dataclass
class _New:
    """A document this batch creates: its (first, derived) id, what it holds, and the event creating it."""

    doc_id: int
    tenant_id: int
    content: bytes
    length: int
    role: str
    start: int
    end: int
    """`start:end`: its span of the batch's `Analysed.terms`."""
    term_ids: bytes = b''
    """Its term ids as stored (`encode_term_ids`)."""


class Rebuilding:
    """What a rebuild knows of the tenants whose index it emptied in its own transaction, kept across its
    batches so they need not ask the database: each term's last block (`KnownTails`), and which contents
    it has created documents of. A content it has not created has none: its lookup is skipped.

    Why: on PostgreSQL the rows the rebuild deleted stay in the indexes until it commits, so each lookup
    of a content's documents, or of a term's last block, also visits the deleted rows of the same key.
    Contents are remembered by the first 8 bytes of their hash, in a sorted array (8 bytes each); a
    prefix shared by chance only costs the lookup it would have made anyway.
    """

    def __init__(self) -> None:
        self.tails = KnownTails()
        self._created: dict[int, NDArray[np.uint64]] = {}

    def maybe_stored(self, tenant_id: int, contents: Sequence[bytes]) -> list[bytes]:
        """Those of `contents` the rebuild may have created documents of in `tenant_id`."""
        seen = self._created.get(tenant_id)
        if seen is None or not contents:
            return []
        prefixes = _prefixes(contents)
        at = np.minimum(np.searchsorted(seen, prefixes), len(seen) - 1)
        return [content for content, hit in zip(contents, seen[at] == prefixes, strict=True) if hit]

    def created(self, keys: Iterable[_Content]) -> None:
        """Remember the `(tenant, content)` of documents a batch created."""
        by_tenant: dict[int, list[bytes]] = {}
        for tenant_id, content in keys:
            by_tenant.setdefault(tenant_id, []).append(content)
        for tenant_id, contents in by_tenant.items():
            joined = np.concatenate((self._created.get(tenant_id, np.zeros(0, dtype=np.uint64)), _prefixes(contents)))
            joined.sort(kind='stable')  # Two sorted runs: merged in about linear time.
            self._created[tenant_id] = joined


def _prefixes(contents: Sequence[bytes]) -> NDArray[np.uint64]:
    return np.frombuffer(b''.join(content[:8].ljust(8, b'\0') for content in contents), dtype=np.uint64)


def analyse_messages(messages: Mapping[int, str]) -> Analysed:
    """The documents of the stored `{entry_key: message}` (see `Analysed`)."""
    vocabulary: dict[str, int] = {}
    terms: list[int] = []
    counts: list[int] = []
    documents: dict[int, list[tuple[str, int, int, int]]] = {}
    for key, message in messages.items():
        spans = documents[key] = []
        for each in index_documents(load_message(message)):
            start = len(terms)
            terms.extend([vocabulary.setdefault(word, len(vocabulary)) for word in each.frequencies])
            counts.extend(each.frequencies.values())
            spans.append((each.role, each.length, start, len(terms)))
    return Analysed(list(vocabulary), documents, np.array(terms, dtype=np.int64), np.array(counts, dtype=np.int64))


def first_members(events: Sequence[Event]) -> dict[_Content, Member]:
    """The member of each `(tenant, content)`'s first event among `events` that the index keeps (not
    `kept_out`), in event order: the only events that may create documents."""
    firsts: dict[_Content, Member] = {}
    for event in events:
        if not event.member.kept_out:
            firsts.setdefault((event.tenant_id, event.member.content_hash), event.member)
    return firsts


async def index_events(
    session: Session, events: Sequence[Event], known: Rebuilding | None = None, analysed: Analysed | None = None
) -> int:
    """Index `events`, in order, as `add_members` on each run of one conversation's consecutive events
    would (see the module notes); the caller keeps every other writer of their tenants out. Returns the
    number of events indexed (those the application's summary rule keeps out included). `known`: what a
    rebuild knows of the tenants it emptied (`Rebuilding`); `analysed`: the documents of the entries
    that may create some, analysed already (`index._ahead`); without it they are analysed here."""
    indexable = [event for event in events if not event.member.kept_out]
    if not indexable:
        return len(events)
    firsts = first_members(indexable)
    contents: dict[int, list[bytes]] = {}
    for tenant_id, content in firsts:
        contents.setdefault(tenant_id, []).append(content)
    stored: dict[_Content, list[_Document]] = {}
    for tenant_id, wanted in contents.items():
        if known is not None:
            wanted = known.maybe_stored(tenant_id, wanted)
        found = await documents_of_contents(session, tenant_id, wanted) if wanted else {}
        stored.update(((tenant_id, content), list(documents)) for content, documents in found.items())
    creators = {key: member for key, member in firsts.items() if key not in stored}
    created = await _create(session, creators, None if known is None else known.tails, analysed)
    if known is not None:
        known.created(created)
    documents = {**stored, **created}
    await _join(session, indexable, documents, set(created))
    return len(events)


async def _create(
    session: Session, creators: dict[_Content, Member], tails: KnownTails | None, analysed: Analysed | None
) -> dict[_Content, list[_Document]]:
    """Create the documents of each `(tenant, content)` by its first event's entry, in event order, with
    their postings and counters; returns them (a content without searchable words has none)."""
    if not creators:
        return {}
    keys = [member.entry_key for member in creators.values()]
    if analysed is None or any(key not in analysed.documents for key in keys):
        analysed = analyse_messages(await stored_messages(session, keys))
    new = [
        _New(document_id(member.entry_key, index), tenant_id, content, length, role, start, end)
        for (tenant_id, content), member in creators.items()
        for index, (role, length, start, end) in enumerate(analysed.documents[member.entry_key])
    ]
    if not new:
        return {}
    words = analysed.terms[_spans(new)]
    used = np.unique(words).tolist()
    term_ids = await intern(session, 'terms', [analysed.words[word] for word in used])
    ids_of_words = np.zeros(len(analysed.words), dtype=np.int64)
    ids_of_words[used] = [term_ids[analysed.words[word]] for word in used]
    ids = ids_of_words[analysed.terms]  # The term id of every pair of the batch (those of `new` are interned).
    sizes = np.fromiter((each.end - each.start for each in new), dtype=np.int64, count=len(new))
    for each, encoded in zip(new, encode_term_id_arrays(ids_of_words[words], sizes), strict=True):
        each.term_ids = encoded
    await _insert_documents(session, new)
    created: dict[_Content, list[_Document]] = {}
    for each in new:
        created.setdefault((each.tenant_id, each.content), []).append((each.doc_id, each.length, each.role))
    for documents in created.values():
        documents.sort()
    by_tenant: dict[int, list[_New]] = {}
    for each in new:
        by_tenant.setdefault(each.tenant_id, []).append(each)
    for tenant_id in sorted(by_tenant):
        made = sorted(by_tenant[tenant_id], key=lambda each: each.doc_id)
        postings = _postings(made, ids, analysed.counts)
        await add_to_blocks(session, tenant_id, postings, (len(made), sum(each.length for each in made)), tails)
    return created


def _spans(documents: Sequence[_New]) -> NDArray[np.int64]:
    """The positions in `Analysed.terms` of `documents`' terms, document after document."""
    starts = np.fromiter((each.start for each in documents), dtype=np.int64, count=len(documents))
    sizes = np.fromiter((each.end - each.start for each in documents), dtype=np.int64, count=len(documents))
    before = np.cumsum(sizes) - sizes  # Where each document's terms start in the result.
    return np.arange(int(sizes.sum()), dtype=np.int64) + np.repeat(starts - before, sizes)


def _postings(made: Sequence[_New], ids: NDArray[np.int64], counts: NDArray[np.int64]) -> NewPostings:
    """The postings of `made` (in document order) as arrays, each document's terms in a row; `ids` and
    `counts` are the term id and frequency of every pair of the batch."""
    where = _spans(made)
    sizes = np.fromiter((each.end - each.start for each in made), dtype=np.int64, count=len(made))
    return NewPostings(
        ids[where],
        np.repeat(np.fromiter((each.doc_id for each in made), dtype=np.int64, count=len(made)), sizes),
        counts[where],
        np.repeat(np.fromiter((each.length for each in made), dtype=np.int64, count=len(made)), sizes),
    )


async def stored_messages(session: Session, entry_keys: Sequence[int]) -> dict[int, str]:
    """The stored messages of `entry_keys`."""
    dialect = session.dialect
    stored: dict[int, str] = {}
    for start in range(0, len(entry_keys), CHUNK):
        rows = await session.rows(
            f'SELECT entry_key, message FROM entries WHERE entry_key {dialect.in_array(1, "bigint")}',  # noqa: S608
            dialect.array(entry_keys[start : start + CHUNK]),
        )
        stored.update((int(row[0]), str(row[1])) for row in rows)
    return stored


async def _insert_documents(session: Session, new: list[_New]) -> None:
    """Insert `new` (in event order) with their derived ids; one whose id another tenant's document holds
    (already stored, or created earlier in this batch) takes an allocated id instead, in event order, as
    `add_members` refuses and allocates them. Updates the ids in `new`."""
    seen: set[int] = set()
    first: list[_New] = []
    for each in new:
        if each.doc_id not in seen:
            seen.add(each.doc_id)
            first.append(each)
    inserted = await insert_returning(
        session, 'documents', DOCUMENT_COLUMNS, [_document_row(each) for each in first], 'doc_id',
        on_conflict='ON CONFLICT DO NOTHING',
    )  # fmt: skip
    kept = {int(row[0]) for row in inserted}
    keeper = {each.doc_id: each for each in first if each.doc_id in kept}
    refused = [each for each in new if keeper.get(each.doc_id) is not each]
    if not refused:
        return
    keys = await allocate_keys(session, 'documents', len(refused))
    for each, key in zip(refused, keys, strict=True):
        each.doc_id = key
    await insert_rows(session, 'documents', DOCUMENT_COLUMNS, [_document_row(each) for each in refused])


def _document_row(each: _New) -> tuple[Any, ...]:
    return (each.doc_id, each.tenant_id, each.content, each.length, each.term_ids, each.role)


async def _join(
    session: Session,
    events: Sequence[Event],
    documents: dict[_Content, list[_Document]],
    created: set[_Content],
) -> None:
    """Each event's documents join its conversation at the event, or are counted again there: the
    membership rows, their occurrence counts, and the conversations' counters."""
    # Pairs of a conversation and a document stored before this batch may be members already.
    candidates: dict[tuple[int, int], None] = {}
    for event in events:
        key = (event.tenant_id, event.member.content_hash)
        if key not in created:
            for doc_id, _, _ in documents.get(key, ()):
                candidates[(event.conv_key, doc_id)] = None
    held = await _members_of(session, list(candidates))
    joined: dict[tuple[int, int], list[Any]] = {}
    again: dict[tuple[int, int], int] = {}
    counters: dict[int, list[int]] = {}
    for event in events:
        member = event.member
        for doc_id, length, _ in documents.get((event.tenant_id, member.content_hash), ()):
            pair = (event.conv_key, doc_id)
            if pair in held:
                again[pair] = again.get(pair, 0) + 1
            elif (row := joined.get(pair)) is not None:
                row[5] += 1
            else:
                joined[pair] = [event.conv_key, doc_id, member.entry_key, member.run_key, member.position, 1]
                counts = counters.setdefault(event.conv_key, [0, 0])
                counts[0] += 1
                counts[1] += length
    dialect = session.dialect
    await insert_rows(session, 'conversation_documents', MEMBER_COLUMNS, sorted(joined.values()))
    columns = (*_PAIR, ('count', 'int'))
    await run_batch(
        session,
        f'UPDATE conversation_documents AS c SET occurrences = c.occurrences + d.count FROM {dialect.batch(columns)} '  # noqa: S608
        'WHERE c.conv_key = d.conv_key AND c.doc_id = d.doc_id',
        sorted((conv_key, doc_id, count) for (conv_key, doc_id), count in again.items()),
    )
    columns = (('conv_key', 'bigint'), ('count', 'bigint'), ('total', 'bigint'))
    await run_batch(
        session,
        'UPDATE conversations AS c SET document_count = c.document_count + d.count, '  # noqa: S608
        f'total_length = c.total_length + d.total FROM {dialect.batch(columns)} WHERE c.conv_key = d.conv_key',
        sorted((conv_key, count, total) for conv_key, (count, total) in counters.items()),
    )


async def _members_of(session: Session, pairs: Sequence[tuple[int, int]]) -> set[tuple[int, int]]:
    """Which `(conv_key, doc_id)` of `pairs` are memberships already."""
    found: set[tuple[int, int]] = set()
    sql = (
        f'SELECT c.conv_key, c.doc_id FROM {session.dialect.batch(_PAIR)} '  # noqa: S608
        'JOIN conversation_documents c ON c.conv_key = d.conv_key AND c.doc_id = d.doc_id'
    )
    for chunk in _chunks(pairs):
        found.update((int(row[0]), int(row[1])) for row in await select_batch(session, sql, chunk))
    return found


def _chunks(items: Sequence[Any]) -> Iterable[Sequence[Any]]:
    return (items[start : start + CHUNK] for start in range(0, len(items), CHUNK))
