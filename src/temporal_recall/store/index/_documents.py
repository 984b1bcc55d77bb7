"""Keeping the BM25 index in step with the log, inside the caller's write transaction, on any backend.
More in docs/design/store.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from temporal_recall.content import load_message

from ..postings._segments import add_postings, merge_if_due
from ..postings._writes import NewPostings
from ..sql._bulk import CHUNK, Batch, Tail, allocate_keys, insert_returning, insert_rows, intern, run_batch
from ..sql._session import Dialect, Row, Session, Statement
from ._terms import IndexTerms, Member, document_id, encode_term_ids, index_documents

__all__ = (
    'CHUNK',
    'DOCUMENT_COLUMNS',
    'MEMBER_COLUMNS',
    'add_members',
    'content_locks',
    'documents_of_contents',
    'documents_with',
    'lock_contents',
    'ordered_content_locks',
    'read_documents',
    'send_tail',
)

_BLOBS = 500
"""The most blobs one statement takes where arrays cannot hold them (one placeholder each; older SQLite
builds allow 999 parameters)."""


def _chunks(items: Sequence[Any], size: int = CHUNK) -> Iterable[Sequence[Any]]:
    return (items[start : start + size] for start in range(0, len(items), size))


_Documents = dict[bytes, list[tuple[int, int, str]]]
"""`content_hash -> [(doc_id, length, role), ...]` in `doc_id` order: the documents of a tenant's
contents, one per role that spoke in the content (`index_documents`)."""


async def _documents_by_hash(session: Session, tenant_id: int, hashes: Sequence[bytes]) -> _Documents:
    """The tenant's documents of the contents among `hashes`."""
    rows: list[Row] = []
    dialect = session.dialect
    for chunk in _chunks(hashes, CHUNK if dialect.supports_array_parameters else _BLOBS):
        if dialect.supports_array_parameters:
            rows += await session.rows(_DOCUMENTS_BY_HASH.format(match=dialect.in_array(2, 'bytea')), tenant_id, chunk)
        else:  # Blobs do not travel in JSON: one placeholder each.
            match = f'IN ({", ".join(f"${index}" for index in range(2, len(chunk) + 2))})'
            rows += await session.rows(_DOCUMENTS_BY_HASH.format(match=match), tenant_id, *chunk)
    return _documents_of(rows)


async def documents_of_contents(
    session: Session, tenant_id: int, hashes: Sequence[bytes]
) -> Mapping[bytes, Sequence[tuple[int, int, str]]]:
    """The tenant's documents of the contents among `hashes`, `(doc_id, length, role)` in `doc_id` order."""
    return await _documents_by_hash(session, tenant_id, hashes)


_DOCUMENTS_BY_HASH = (
    'SELECT content_hash, doc_id, length, role FROM documents WHERE tenant_id = $1 AND content_hash {match}'
)


def _documents_of(rows: Iterable[Row]) -> _Documents:
    found: _Documents = {}
    for row in rows:
        found.setdefault(bytes(row[0]), []).append((int(row[1]), int(row[2]), str(row[3])))
    for documents in found.values():
        documents.sort()
    return found


def documents_with(dialect: Dialect, tenant_id: int, hashes: Sequence[bytes]) -> tuple[str, list[Any]] | None:
    """Where statements are round trips, the read of the tenant's documents of `hashes` as a statement and
    its parameters, for a write to send with one of its own (`sql._bulk.insert_then`) and pass the rows
    (`read_documents`) to `add_members`; `None` where it costs no round trip to read them there."""
    if not (dialect.statements_are_round_trips and dialect.supports_array_parameters) or len(hashes) > CHUNK:
        return None
    return _DOCUMENTS_BY_HASH.format(match=dialect.in_array(2, 'bytea')), [tenant_id, list(hashes)]


def read_documents(rows: Iterable[Row]) -> Mapping[bytes, Sequence[tuple[int, int, str]]]:
    """The rows of the read `documents_with` gave, as `add_members` takes them."""
    return _documents_of(rows)


async def _terms_of(session: Session, members: Sequence[Member]) -> list[tuple[Member, int, IndexTerms]]:
    """The documents of the indexable members among `members`, in order (a member's in the order its
    speakers speak, with that index), their terms read back from the log when not prepared."""
    stored: dict[int, str] = {}
    dialect = session.dialect
    unprepared = [member.entry_key for member in members if member.prepared is None]
    for chunk in _chunks(unprepared):
        rows = await session.rows(
            f'SELECT entry_key, message FROM entries WHERE entry_key {dialect.in_array(1, "bigint")}',  # noqa: S608
            dialect.array(chunk),
        )
        stored.update((int(row[0]), str(row[1])) for row in rows)
    indexable: list[tuple[Member, int, IndexTerms]] = []
    for member in members:
        documents = (
            member.prepared.terms
            if member.prepared is not None
            else index_documents(load_message(stored[member.entry_key]))
        )
        indexable.extend((member, index, terms) for index, terms in enumerate(documents))
    return indexable


DOCUMENT_COLUMNS = (
    ('doc_id', 'bigint'),
    ('tenant_id', 'bigint'),
    ('content_hash', 'bytea'),
    ('length', 'int'),
    ('term_ids', 'bytea'),
    ('role', 'text'),
)


async def _create_documents(
    session: Session,
    tenant_id: int,
    new: Sequence[tuple[Member, int, IndexTerms]],
    *,
    merge: bool,
    terms: Mapping[str, int] | None = None,
    tail: Tail | None = None,
) -> tuple[_Documents, bool]:
    """Create the documents (and postings) for `new` (a member once per role), each numbered by the
    entry that created it (`document_id`); returns them and whether the tenant's segments are due a merge.

    A document another writer created first (possible only where no content lock was taken) is left
    to it: the unique key refuses ours, and the caller joins theirs. The postings and the collection
    statistics go to the index as a segment of this write's own (`postings._segments`).
    """
    if not new:
        return {}, False
    term_ids = await intern(session, 'terms', (word for _, _, index in new for word in index.frequencies), terms)
    rows = [
        (
            document_id(member.entry_key, index),
            tenant_id,
            member.content_hash,
            terms.length,
            encode_term_ids(term_ids[word] for word in terms.frequencies),
            terms.role,
        )
        for member, index, terms in new
    ]
    inserted = await insert_returning(
        session, 'documents', DOCUMENT_COLUMNS, rows, 'doc_id', on_conflict='ON CONFLICT DO NOTHING'
    )
    contents = list(dict.fromkeys(member.content_hash for member, _, _ in new))
    if len(inserted) == len(rows):
        # Every row went in (the common case): the tenant's documents of these contents that this write
        # keeps are its own rows, so they are not read back. (A concurrent writer's document of another
        # role of the same content would be dropped below anyway: only this write's ids are kept.)
        found: _Documents = {}
        for row in rows:
            found.setdefault(row[2], []).append((row[0], row[3], row[5]))
        for documents in found.values():
            documents.sort()
    else:
        found = await _documents_by_hash(session, tenant_id, contents)
    # An id another tenant's document holds (an entry indexed in two scopes: a fork or a scope change
    # across them) is refused; such documents take ids above every derived one (`FIRST_ALLOCATED`).
    refused = [row for row in rows if not any(role == row[5] for _, _, role in found.get(row[2], ()))]
    if refused:
        keys = await allocate_keys(session, 'documents', len(refused))
        await insert_rows(
            session,
            'documents',
            DOCUMENT_COLUMNS,
            [(key, *row[1:]) for key, row in zip(keys, refused, strict=True)],
            on_conflict='ON CONFLICT DO NOTHING',
        )
        moved = dict(zip((row[0] for row in refused), keys, strict=True))
        rows = [(moved.get(row[0], row[0]), *row[1:]) for row in rows]
        found = await _documents_by_hash(session, tenant_id, contents)
    mine = {row[0] for row in rows}
    created: _Documents = {}
    for content, documents in found.items():
        kept = [document for document in documents if document[0] in mine]
        if kept:
            created[content] = kept
    inserted = {doc_id for documents in created.values() for doc_id, _, _ in documents}
    made = sorted(
        ((row[0], terms) for row, (_, _, terms) in zip(rows, new, strict=True) if row[0] in inserted),
        key=lambda made: made[0],
    )
    postings = NewPostings(
        [term_ids[word] for _, terms in made for word in terms.frequencies],
        [doc_id for doc_id, terms in made for _ in terms.frequencies],
        [count for _, terms in made for count in terms.frequencies.values()],
        [terms.length for _, terms in made for _ in terms.frequencies],
    )
    due = await add_postings(
        session, tenant_id, postings, (len(made), sum(terms.length for _, terms in made)), merge=merge, tail=tail
    )
    return created, due


async def send_tail(session: Session, tail: Tail, tenant_id: int, *, merge: bool) -> bool:
    """Send an append's last writes (`tail`, which `add_members(tail=...)` added to): with `merge` (the
    caller keeps the tenant's other writers out), a merge its segment made due runs here; otherwise
    returns whether one is due, for a merge after the commit."""
    counts = await tail.send(session)
    return counts is not None and await merge_if_due(session, tenant_id, counts, merge=merge)


async def _join(
    session: Session,
    conv_key: int,
    joining: Sequence[tuple[Member, int, int, int]],
    tail: Tail | None = None,
) -> None:
    """Membership rows (with their occurrence counts) and the conversation's counters (to `tail`, when
    given). Nothing any other writer of the tenant writes: documents are shared, but joining one writes
    only the membership."""
    joined = (len(joining), sum(length for _, _, length, _ in joining))
    members = Batch(
        'conversation_documents',
        MEMBER_COLUMNS,
        [
            (conv_key, doc_id, member.entry_key, member.run_key, member.position, count)
            for member, doc_id, _, count in joining
        ],
    )
    writes = Tail('conversations', ('conv_key', conv_key)) if tail is None else tail
    writes.batches.append(members)
    writes.increment('document_count', joined[0])
    writes.increment('total_length', joined[1])
    if tail is None:  # Sent now, as one statement where arrays bind.
        await writes.send(session)


MEMBER_COLUMNS = (
    ('conv_key', 'bigint'),
    ('doc_id', 'bigint'),
    ('entry_key', 'bigint'),
    ('run_key', 'bigint'),
    ('position', 'int'),
    ('occurrences', 'int'),
)


async def lock_contents(session: Session, tenant_id: int, hashes: Iterable[bytes]) -> None:
    """Where writers run side by side, take the tenant's creation lock of each content among `hashes` that
    has no document yet, before the write allocates its entry keys: writers that are about to create the
    same document take turns, so the first holder's entry is the lowest one holding it, the creator the
    rebuild finds (docs/design/store.md, "Concurrency"). Contents already indexed take no lock."""
    locks = content_locks(session, tenant_id, hashes)
    if locks is not None:
        await session.run(locks[0], *locks[1])


def content_locks(session: Session, tenant_id: int, hashes: Iterable[bytes]) -> Statement | None:
    """`lock_contents`' statement, for a write to send as its key allocation's `after` (`sql._bulk.allocate_keys`),
    or `None` when there is nothing to lock."""
    sql = session.dialect.lock_new_contents()
    if sql is None:
        return None
    ordered_hashes, ordered_keys = ordered_content_locks(tenant_id, hashes)
    if not ordered_keys:
        return None
    return sql, (tenant_id, ordered_hashes, ordered_keys)


def ordered_content_locks(tenant_id: int, hashes: Iterable[bytes]) -> tuple[list[bytes], list[int]]:
    """The contents among `hashes` and their creation lock keys, in the one order every writer takes
    them (ascending keys), so that no two writers deadlock; a content per key."""
    keys = {_content_lock(tenant_id, content): content for content in hashes}
    ordered = sorted(keys)
    return [keys[key] for key in ordered], ordered


def _content_lock(tenant_id: int, content: bytes) -> int:
    """A 32-bit lock key for a tenant's content (a collision only makes two writers take turns)."""
    return (int.from_bytes(content[:4], 'big') ^ (tenant_id * 2654435761)) % 2**32 - 2**31


async def add_members(
    session: Session,
    conv_key: int,
    tenant_id: int,
    members: Sequence[Member],
    *,
    merge: bool = True,
    terms: Mapping[str, int] | None = None,
    stored: Mapping[bytes, Sequence[tuple[int, int, str]]] | None = None,
    tail: Tail | None = None,
) -> bool:
    """Index `members` (in order) into the conversation, creating the tenant's documents they lack.

    Set-oriented, so a fork or a rebuild costs a handful of statements rather than several per entry.
    A content's documents are created by the first member holding it, numbered by its entry
    (`document_id`; their ids are the ranking tie-break). Summaries and messages without searchable
    words are skipped. A document already a member keeps the entry where it first appeared;
    otherwise the first member holding it becomes its membership row. Either way the membership
    counts the entries holding the document (`occurrences`), so a search knows which documents were
    said more than once. With `merge`, the tenant's segments are merged here when due (the caller
    keeps other writers out); otherwise returns whether they are due, for a merge off the write path.
    `terms`: term ids this transaction read already (`_bulk.intern`). `stored`: the tenant's documents
    of every member's content, read by this transaction after its content locks (`documents_with`), so
    no writer can have created one of them since. `tail`: the conversation's row's update (`conv_key`'s),
    which the new segment's rows, its count and the membership rows and counters join, for the caller
    to send at its end (`send_tail`, which settles the merge).
    """
    first: dict[bytes, Member] = {}
    counts: Counter[bytes] = Counter()
    for member in members:
        if member.kept_out:
            continue
        first.setdefault(member.content_hash, member)
        counts[member.content_hash] += 1
    if not first:
        return False
    dialect = session.dialect
    if stored is None:
        docs = await _documents_by_hash(session, tenant_id, list(first))
    else:
        docs = {content: list(stored[content]) for content in first if content in stored}
    new = await _terms_of(session, [member for content, member in first.items() if content not in docs])
    created, due = await _create_documents(session, tenant_id, new, merge=merge, terms=terms, tail=tail)
    late = [content for member, _, _ in new if (content := member.content_hash) not in created]
    docs.update(created)
    if late:  # Made by a concurrent writer after our first read.
        docs.update(await _documents_by_hash(session, tenant_id, late))
    found = [doc_id for content, documents in docs.items() if content not in created for doc_id, _, _ in documents]
    held: set[int] = set()
    for chunk in _chunks(found):
        rows = await session.rows(
            f'SELECT doc_id FROM conversation_documents WHERE conv_key = $1 AND doc_id {dialect.in_array(2, "bigint")}',  # noqa: S608
            conv_key,
            dialect.array(chunk),
        )
        held.update(int(row[0]) for row in rows)
    # Each document of a content (one per speaker) joins, or is counted again, with it.
    documents = [(content, doc_id, length) for content in first for doc_id, length, _ in docs.get(content, ())]
    columns = (('conv_key', 'bigint'), ('doc_id', 'bigint'), ('count', 'int'))
    await run_batch(
        session,
        f'UPDATE conversation_documents AS c SET occurrences = c.occurrences + d.count FROM {dialect.batch(columns)} '  # noqa: S608
        'WHERE c.conv_key = d.conv_key AND c.doc_id = d.doc_id',
        [(conv_key, doc_id, counts[content]) for content, doc_id, _ in documents if doc_id in held],
    )
    joining = [
        (first[content], doc_id, length, counts[content]) for content, doc_id, length in documents if doc_id not in held
    ]
    if joining:
        await _join(session, conv_key, joining, tail)
    return due
