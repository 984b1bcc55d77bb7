"""Keeping the BM25 index in step with the log, inside the caller's write transaction, on any backend.
More in docs/store.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import chain, repeat
from typing import Any

from temporal_recall.content import load_message

from ..postings._segments import add_postings
from ..postings._writes import NewPostings
from ..sql._bulk import CHUNK, insert_rows, intern, run_batch
from ..sql._session import Session
from ._terms import IndexTerms, Member, encode_term_ids, index_documents

__all__ = (
    'CHUNK',
    'add_members',
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
    found: _Documents = {}
    dialect = session.dialect
    for chunk in _chunks(hashes, CHUNK if dialect.supports_array_parameters else _BLOBS):
        if dialect.supports_array_parameters:
            match, params = dialect.in_array(2, 'bytea'), [list(chunk)]
        else:  # Blobs do not travel in JSON: one placeholder each.
            match = f'IN ({", ".join(f"${index}" for index in range(2, len(chunk) + 2))})'
            params: list[Any] = list(chunk)
        rows = await session.rows(
            f'SELECT content_hash, doc_id, length, role FROM documents WHERE tenant_id = $1 AND content_hash {match}',  # noqa: S608
            tenant_id,
            *params,
        )
        for row in rows:
            found.setdefault(bytes(row[0]), []).append((int(row[1]), int(row[2]), str(row[3])))
    for documents in found.values():
        documents.sort()
    return found


async def _terms_of(session: Session, members: Sequence[Member]) -> list[tuple[Member, IndexTerms]]:
    """The documents of the indexable members among `members`, in order (a member's in the order its
    speakers speak), their terms read back from the log when not prepared."""
    stored: dict[int, str] = {}
    dialect = session.dialect
    unprepared = [member.entry_key for member in members if member.prepared is None]
    for chunk in _chunks(unprepared):
        rows = await session.rows(
            f'SELECT entry_key, message FROM entries WHERE entry_key {dialect.in_array(1, "bigint")}',  # noqa: S608
            dialect.array(chunk),
        )
        stored.update((int(row[0]), str(row[1])) for row in rows)
    indexable: list[tuple[Member, IndexTerms]] = []
    for member in members:
        documents = (
            member.prepared.terms
            if member.prepared is not None
            else index_documents(load_message(stored[member.entry_key]))
        )
        indexable.extend((member, terms) for terms in documents)
    return indexable


_DOCUMENT_COLUMNS = (
    ('tenant_id', 'bigint'),
    ('content_hash', 'bytea'),
    ('length', 'int'),
    ('term_ids', 'bytea'),
    ('role', 'text'),
    ('refs', 'int'),
)


async def _create_documents(session: Session, tenant_id: int, new: Sequence[tuple[Member, IndexTerms]]) -> _Documents:
    """Create the documents (and postings) for `new`, numbered in its order (a member once per role).

    A new document is created for the member about to join it, so it starts with one reference. The
    tenant's counters are the caller's (`_join`). Where the dialect `supports_array_parameters`, one statement
    inserts the documents, which take their ids from the identity as `unnest` yields them, in
    `new`'s order. The postings go to the index as a segment (`postings._segments`).
    """
    if not new:
        return {}
    term_ids = await intern(session, 'terms', (word for _, terms in new for word in terms.frequencies))
    hashes = [member.content_hash for member, _ in new]
    lengths = [terms.length for _, terms in new]
    ids_of = [[term_ids[word] for word in terms.frequencies] for _, terms in new]
    term_lists = [encode_term_ids(ids) for ids in ids_of]
    roles = [terms.role for _, terms in new]
    if not session.dialect.supports_array_parameters:
        documents = [(tenant_id, *row, 1) for row in zip(hashes, lengths, term_lists, roles, strict=True)]
        await insert_rows(session, 'documents', _DOCUMENT_COLUMNS, documents)
        created = await _documents_by_hash(session, tenant_id, list(dict.fromkeys(hashes)))
    else:
        rows = await session.rows(
            'INSERT INTO documents (tenant_id, content_hash, length, refs, term_ids, role) '
            'SELECT $1, h, l, 1, t, r FROM unnest($2::bytea[], $3::int[], $4::bytea[], $5::text[]) AS x(h, l, t, r) '
            'RETURNING doc_id, content_hash, length, role',
            tenant_id,
            hashes,
            lengths,
            term_lists,
            roles,
        )
        created = {}
        for row in sorted(rows, key=lambda row: int(row[0])):
            created.setdefault(bytes(row[1]), []).append((int(row[0]), int(row[2]), str(row[3])))
    ids = {(content, role): doc_id for content, found in created.items() for doc_id, _, role in found}
    per_document = [len(ids) for ids in ids_of]
    doc_ids = [ids[member.content_hash, terms.role] for member, terms in new]  # Ascending: creation order.
    postings = NewPostings(
        list(chain.from_iterable(ids_of)),
        list(chain.from_iterable(map(repeat, doc_ids, per_document))),
        [count for _, terms in new for count in terms.frequencies.values()],
        list(chain.from_iterable(map(repeat, lengths, per_document))),
    )
    await add_postings(session, tenant_id, postings)
    # A document holds a term once, so a term's new document count is its number of new postings.
    # Rows in term order, as every writer takes them, so two writers sharing terms cannot deadlock.
    await insert_rows(
        session,
        'term_documents',
        (('tenant_id', 'bigint'), ('term_id', 'bigint'), ('document_count', 'bigint')),
        [(tenant_id, term_id, count) for term_id, count in sorted(Counter(postings.term_ids).items())],
        order_by='d.term_id',
        on_conflict='ON CONFLICT (tenant_id, term_id) DO UPDATE '
        'SET document_count = term_documents.document_count + excluded.document_count',
    )
    return created


async def _join(
    session: Session,
    conv_key: int,
    tenant_id: int,
    joining: Sequence[tuple[Member, int, int, int]],
    existing: Sequence[int],
    created: tuple[int, int],
) -> None:
    """Membership rows (with their occurrence counts), a reference more on `existing` documents, and the
    counters of the conversation and of the tenant (`created` = count and total length of the documents
    just made). In one statement where the dialect `supports_array_parameters`."""
    joined = (len(joining), sum(length for _, _, length, _ in joining))
    members = [
        (conv_key, doc_id, member.entry_key, member.run_key, member.position, count)
        for member, doc_id, _, count in joining
    ]
    if session.dialect.supports_array_parameters:
        await session.run(
            """
            WITH member AS (
                INSERT INTO conversation_documents (conv_key, doc_id, entry_key, run_key, position, occurrences)
                SELECT $1, * FROM unnest($3::bigint[], $4::bigint[], $5::bigint[], $6::int[], $12::int[])
            ), referenced AS (
                UPDATE documents SET refs = refs + 1 WHERE doc_id = ANY($7::bigint[])
            ), tenant AS (
                UPDATE tenants SET document_count = document_count + $8, total_length = total_length + $9
                WHERE tenant_id = $2 AND $8 > 0
            )
            UPDATE conversations SET document_count = document_count + $10, total_length = total_length + $11
            WHERE conv_key = $1
            """,
            conv_key,
            tenant_id,
            *(list(column) for column in list(zip(*members, strict=True))[1:5]),  # doc_id … position
            list(existing),
            *created,
            *joined,
            [count for *_, count in members],
        )
        return
    await insert_rows(
        session,
        'conversation_documents',
        (
            ('conv_key', 'bigint'),
            ('doc_id', 'bigint'),
            ('entry_key', 'bigint'),
            ('run_key', 'bigint'),
            ('position', 'int'),
            ('occurrences', 'int'),
        ),
        members,
    )
    if existing:
        await session.run(
            f'UPDATE documents SET refs = refs + 1 WHERE doc_id {session.dialect.in_array(1, "bigint")}',  # noqa: S608
            session.dialect.array(existing),
        )
    if created[0]:
        await session.run(
            'UPDATE tenants SET document_count = document_count + $1, total_length = total_length + $2 '
            'WHERE tenant_id = $3',
            *created,
            tenant_id,
        )
    await session.run(
        'UPDATE conversations SET document_count = document_count + $1, total_length = total_length + $2 '
        'WHERE conv_key = $3',
        *joined,
        conv_key,
    )


async def add_members(session: Session, conv_key: int, tenant_id: int, members: Sequence[Member]) -> None:
    """Index `members` (in order) into the conversation, creating the tenant's documents they lack.

    Set-oriented, so a fork or a rebuild costs a handful of statements rather than several per entry.
    Documents are created in the order their content first occurs in `members`, a content's in the
    order its speakers speak (their ids are the ranking tie-break). Summaries and messages without
    searchable words are skipped. A document already a member keeps the entry where it first
    appeared; otherwise the first member holding it becomes its membership row. Either way the
    membership counts the entries holding the document (`occurrences`), so a search knows which
    documents were said more than once. The caller holds the tenant's lock.
    """
    first: dict[bytes, Member] = {}
    counts: Counter[bytes] = Counter()
    for member in members:
        if member.kept_out:
            continue
        first.setdefault(member.content_hash, member)
        counts[member.content_hash] += 1
    if not first:
        return
    dialect = session.dialect
    docs = await _documents_by_hash(session, tenant_id, list(first))
    found = [doc_id for documents in docs.values() for doc_id, _, _ in documents]
    held: set[int] = set()
    for chunk in _chunks(found):
        rows = await session.rows(
            f'SELECT doc_id FROM conversation_documents WHERE conv_key = $1 AND doc_id {dialect.in_array(2, "bigint")}',  # noqa: S608
            conv_key,
            dialect.array(chunk),
        )
        held.update(int(row[0]) for row in rows)
    existing = [doc_id for doc_id in found if doc_id not in held]
    new = await _terms_of(session, [member for content, member in first.items() if content not in docs])
    created = await _create_documents(session, tenant_id, new)
    docs.update(created)
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
        made = [length for found in created.values() for _, length, _ in found]
        totals = (len(made), sum(made))
        await _join(session, conv_key, tenant_id, joining, existing, totals)
