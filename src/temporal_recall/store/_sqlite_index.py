"""Keeping the BM25 index in step with the log, inside the caller's write transaction.

A conversation's index membership is the set of documents its reachable entries hold, each
remembered at the first entry where it appeared. Documents are per tenant (scope), keyed by content
hash, so a message re-sent by a later run, re-instantiated by Temporal, or shared by a fork of the
same scope is indexed once; a fork into another scope gets its own documents.

Ordering is what makes `reindex` reproduce the incremental index: documents are numbered in the
order their first membership event happened. An event is "entry E joined conversation C", which
happens either when E was written to C (ordered by E's key) or when C was created over entries that
already existed (ordered by `C.created_seq`, the largest entry key at that moment, then by C, then
by entry key). `membership_order` states that rule; the write path follows it by construction and
`reindex` sorts by it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from temporal_recall.content import load_message
from temporal_recall.text._analyzer import ANALYZER

from ._rows import Member, membership_order
from ._serialization import IndexTerms, decode_term_ids, encode_term_ids, index_terms, scope_key
from ._sqlite_db import Database

__all__ = (
    'add_members',
    'chain_members',
    'conversation_tips',
    'index_conversation',
    'intern_run',
    'json_keys',
    'rebuild_index',
    'release_members',
    'tenant_of',
)

_CHUNK = 500
_T = TypeVar('_T')


def json_keys(keys: Iterable[int]) -> str:
    """A list of integer keys as one JSON parameter, read back in SQL with `json_each(?)`."""
    return json.dumps(list(keys))


async def tenant_of(db: Database, scope: str | None) -> int:
    """The tenant id of `scope`, created on first use."""
    key = scope_key(scope)
    await db.run('INSERT OR IGNORE INTO tenants (scope_key) VALUES (?)', (key,))
    return int(await db.value('SELECT tenant_id FROM tenants WHERE scope_key = ?', (key,)))


async def intern_run(db: Database, run_id: str | None) -> int | None:
    if run_id is None:
        return None
    await db.run('INSERT OR IGNORE INTO runs (run_id) VALUES (?)', (run_id,))
    return int(await db.value('SELECT run_key FROM runs WHERE run_id = ?', (run_id,)))


async def _intern_terms(db: Database, terms: Sequence[str]) -> dict[str, int]:
    ids: dict[str, int] = {}
    for start in range(0, len(terms), _CHUNK):
        chunk = terms[start : start + _CHUNK]
        await db.many('INSERT OR IGNORE INTO terms (term) VALUES (?)', [(term,) for term in chunk])
        rows = await db.rows(
            'SELECT term, term_id FROM terms WHERE term IN (SELECT value FROM json_each(?))', (json.dumps(chunk),)
        )
        ids.update((str(term), int(term_id)) for term, term_id in rows)
    return ids


def _placeholders(count: int) -> str:
    """`?, ?, …` for an `IN (…)` list of `count` parameters (only placeholders are formatted into SQL)."""
    return ', '.join('?' * count)


def _chunks(items: Sequence[_T], size: int = _CHUNK) -> Iterable[Sequence[_T]]:
    return (items[start : start + size] for start in range(0, len(items), size))


async def _documents_by_hash(db: Database, tenant_id: int, hashes: Sequence[bytes]) -> dict[bytes, tuple[int, int]]:
    """`content_hash -> (doc_id, length)` of the tenant's documents among `hashes`."""
    found: dict[bytes, tuple[int, int]] = {}
    for chunk in _chunks(hashes):
        rows = await db.rows(
            'SELECT content_hash, doc_id, length FROM documents '  # noqa: S608 (placeholders only)
            f'WHERE tenant_id = ? AND content_hash IN ({_placeholders(len(chunk))})',
            (tenant_id, *chunk),
        )
        found.update((bytes(content), (int(doc_id), int(length))) for content, doc_id, length in rows)
    return found


async def _terms_of(db: Database, members: Sequence[Member]) -> list[tuple[Member, IndexTerms]]:
    """The indexable members among `members` with their terms, read back from the log when not prepared."""
    stored: dict[int, str] = {}
    unprepared = [member.entry_key for member in members if member.prepared is None]
    for chunk in _chunks(unprepared):
        rows = await db.rows(
            'SELECT entry_key, message FROM entries WHERE entry_key IN (SELECT value FROM json_each(?))',
            (json_keys(chunk),),
        )
        stored.update((int(key), str(message)) for key, message in rows)
    indexable: list[tuple[Member, IndexTerms]] = []
    for member in members:
        terms = (
            member.prepared.terms
            if member.prepared is not None
            else index_terms(load_message(stored[member.entry_key]))
        )
        if terms is not None:
            indexable.append((member, terms))
    return indexable


async def _create_documents(
    db: Database, tenant_id: int, new: Sequence[tuple[Member, IndexTerms]]
) -> dict[bytes, tuple[int, int]]:
    """Create the documents (and postings) for `new`, numbered in its order; `content_hash -> (doc_id, length)`."""
    if not new:
        return {}
    term_ids = await _intern_terms(db, sorted({word for _, terms in new for word in terms.frequencies}))
    await db.many(
        'INSERT INTO documents (tenant_id, content_hash, length, refs, term_ids, role) VALUES (?, ?, ?, 0, ?, ?)',
        [
            (
                tenant_id,
                member.content_hash,
                terms.length,
                encode_term_ids([term_ids[word] for word in terms.frequencies]),
                terms.role,
            )
            for member, terms in new
        ],
    )
    created = await _documents_by_hash(db, tenant_id, [member.content_hash for member, _ in new])
    await db.many(
        'INSERT INTO postings (tenant_id, term_id, doc_id, term_frequency, length) VALUES (?, ?, ?, ?, ?)',
        [
            (tenant_id, term_ids[word], created[member.content_hash][0], frequency, terms.length)
            for member, terms in new
            for word, frequency in terms.frequencies.items()
        ],
    )
    await db.many(
        'INSERT INTO term_documents (tenant_id, term_id, document_count) VALUES (?, ?, ?) '
        'ON CONFLICT (tenant_id, term_id) DO UPDATE SET document_count = document_count + excluded.document_count',
        [
            (tenant_id, term_id, count)
            for term_id, count in Counter(term_ids[word] for _, terms in new for word in terms.frequencies).items()
        ],
    )
    await db.run(
        'UPDATE tenants SET document_count = document_count + ?, total_length = total_length + ? WHERE tenant_id = ?',
        (len(new), sum(terms.length for _, terms in new), tenant_id),
    )
    return created


async def add_members(db: Database, conv_key: int, tenant_id: int, members: Sequence[Member]) -> None:
    """Index `members` (in order) into the conversation, creating the tenant's documents they lack.

    Set-oriented, so a fork or a rebuild costs a handful of statements rather than several per entry.
    Documents are created in the order their content first occurs in `members` (their ids are the
    ranking tie-break). Summaries and messages without searchable words are skipped. A document
    already a member keeps the entry where it first appeared; otherwise the first member holding it
    becomes its membership row. Either way the membership counts the entries holding the document
    (`occurrences`), so a search knows which documents were said more than once.
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
    docs = await _documents_by_hash(db, tenant_id, list(first))
    missing = [member for content, member in first.items() if content not in docs]
    docs.update(await _create_documents(db, tenant_id, await _terms_of(db, missing)))
    held: set[int] = set()
    doc_ids = [docs[content][0] for content in first if content in docs]
    for chunk in _chunks(doc_ids):
        rows = await db.rows(
            'SELECT doc_id FROM conversation_documents '  # noqa: S608 (placeholders only)
            f'WHERE conv_key = ? AND doc_id IN ({_placeholders(len(chunk))})',
            (conv_key, *chunk),
        )
        held.update(int(row[0]) for row in rows)
    joining: list[tuple[Member, int, int]] = []
    for content, member in first.items():
        if content in docs and docs[content][0] not in held:
            joining.append((member, *docs[content]))
    await db.many(
        'UPDATE conversation_documents SET occurrences = occurrences + ? WHERE conv_key = ? AND doc_id = ?',
        [
            (counts[content], conv_key, docs[content][0])
            for content in first
            if content in docs and docs[content][0] in held
        ],
    )
    if not joining:
        return
    await db.many(
        'INSERT INTO conversation_documents (conv_key, doc_id, entry_key, run_key, position, occurrences) '
        'VALUES (?, ?, ?, ?, ?, ?)',
        [
            (conv_key, doc_id, member.entry_key, member.run_key, member.position, counts[member.content_hash])
            for member, doc_id, _ in joining
        ],
    )
    await db.many('UPDATE documents SET refs = refs + 1 WHERE doc_id = ?', [(doc_id,) for _, doc_id, _ in joining])
    await db.run(
        'UPDATE conversations SET document_count = document_count + ?, total_length = total_length + ? '
        'WHERE conv_key = ?',
        (len(joining), sum(length for _, _, length in joining), conv_key),
    )


async def release_members(db: Database, conv_key: int) -> None:
    """Drop the conversation's membership, and the documents (with postings) no other conversation holds."""
    held = await db.rows('SELECT doc_id FROM conversation_documents WHERE conv_key = ?', (conv_key,))
    await db.run('DELETE FROM conversation_documents WHERE conv_key = ?', (conv_key,))
    await db.run('UPDATE conversations SET document_count = 0, total_length = 0 WHERE conv_key = ?', (conv_key,))
    released: dict[int, tuple[int, int]] = {}
    orphans: list[int] = []
    for chunk in _chunks([int(row[0]) for row in held]):
        keys = json_keys(chunk)
        await db.run('UPDATE documents SET refs = refs - 1 WHERE doc_id IN (SELECT value FROM json_each(?))', (keys,))
        rows = await db.rows(
            'SELECT doc_id, tenant_id, length, term_ids FROM documents '
            'WHERE doc_id IN (SELECT value FROM json_each(?)) AND refs <= 0',
            (keys,),
        )
        dropped = [
            (tenant_id, term_id, doc_id)
            for doc_id, tenant_id, _, term_ids in rows
            for term_id in decode_term_ids(term_ids)
        ]
        await db.many('DELETE FROM postings WHERE tenant_id = ? AND term_id = ? AND doc_id = ?', dropped)
        emptied = Counter((tenant_id, term_id) for tenant_id, term_id, _ in dropped)
        await db.many(
            'UPDATE term_documents SET document_count = document_count - ? WHERE tenant_id = ? AND term_id = ?',
            [(count, tenant_id, term_id) for (tenant_id, term_id), count in emptied.items()],
        )
        await db.many(
            'DELETE FROM term_documents WHERE tenant_id = ? AND term_id = ? AND document_count <= 0', list(emptied)
        )
        for doc_id, tenant_id, length, _ in rows:
            orphans.append(doc_id)
            count, total = released.get(tenant_id, (0, 0))
            released[tenant_id] = (count + 1, total + length)
    for chunk in _chunks(orphans):
        await db.run('DELETE FROM documents WHERE doc_id IN (SELECT value FROM json_each(?))', (json_keys(chunk),))
    await db.many(
        'UPDATE tenants SET document_count = document_count - ?, total_length = total_length - ? WHERE tenant_id = ?',
        [(count, total, tenant_id) for tenant_id, (count, total) in released.items()],
    )


async def conversation_tips(db: Database, conv_key: int) -> list[int]:
    """The entry keys a conversation reaches its history from: its head and the tips of its branches."""
    rows = await db.rows(
        'SELECT head_key FROM conversations WHERE conv_key = ? AND head_key IS NOT NULL '
        'UNION SELECT entry_key FROM conversation_branches WHERE conv_key = ?',
        (conv_key, conv_key),
    )
    return [int(row[0]) for row in rows]


async def chain_members(db: Database, tips: Sequence[int]) -> list[Member]:
    """Every entry reachable from `tips` (through parent links), in entry-key order."""
    if not tips:
        return []
    rows = await db.rows(
        """
        WITH RECURSIVE reach(k) AS (
            SELECT value FROM json_each(?)
            UNION
            SELECT e.parent_key FROM reach JOIN entries e ON e.entry_key = reach.k WHERE e.parent_key IS NOT NULL
        )
        SELECT e.entry_key, e.position, e.run_key, e.content_hash, e.unindexed
        FROM reach JOIN entries e ON e.entry_key = reach.k
        ORDER BY e.entry_key
        """,
        (json_keys(tips),),
    )
    return [
        Member(entry_key=row[0], position=row[1], run_key=row[2], content_hash=row[3], unindexed=bool(row[4]))
        for row in rows
    ]


async def index_conversation(
    db: Database, conv_key: int, tenant_id: int, known: Mapping[int, Member] | None = None
) -> None:
    """Index everything the conversation reaches, in entry-key order: for a conversation created over stored
    entries. `known` are members this transaction prepared (their terms are not read back from the log)."""
    members = await chain_members(db, await conversation_tips(db, conv_key))
    if known:
        members = [known.get(member.entry_key, member) for member in members]
    await add_members(db, conv_key, tenant_id, members)


async def rebuild_index(db: Database, progress: Callable[[int, int], None] | None = None) -> int:
    """Drop the index and rebuild it from the log, in membership-event order, with this release's analyzer
    (recorded in `index_settings`). Returns the document count."""
    for statement in (
        'DELETE FROM postings',
        'DELETE FROM term_documents',
        'DELETE FROM conversation_documents',
        'DELETE FROM documents',
        'DELETE FROM terms',
        "DELETE FROM sqlite_sequence WHERE name = 'documents'",
        "DELETE FROM index_settings WHERE name = 'analyzer'",
        'UPDATE tenants SET document_count = 0, total_length = 0',
        'UPDATE conversations SET document_count = 0, total_length = 0',
        'DELETE FROM runs WHERE run_key NOT IN (SELECT run_key FROM entries WHERE run_key IS NOT NULL)',
        'DELETE FROM tenants WHERE tenant_id NOT IN (SELECT tenant_id FROM conversations)',
    ):
        await db.run(statement)
    events: list[tuple[tuple[int, int, int, int], int, int, Member]] = []
    for conv_key, tenant_id, created_seq in await db.rows(
        'SELECT conv_key, tenant_id, created_seq FROM conversations ORDER BY conv_key'
    ):
        for member in await chain_members(db, await conversation_tips(db, conv_key)):
            events.append((membership_order(member.entry_key, conv_key, created_seq), conv_key, tenant_id, member))
    events.sort(key=lambda event: event[0])
    total = len(events)
    if progress is not None:
        progress(0, total)
    done = 0
    while done < total:
        _, conv_key, tenant_id, _ = events[done]
        batch: list[Member] = []
        while done < total and events[done][1] == conv_key and len(batch) < 10 * _CHUNK:
            batch.append(events[done][3])
            done += 1
        await add_members(db, conv_key, tenant_id, batch)
        if progress is not None:
            progress(done, total)
    await db.run("INSERT INTO index_settings (name, value) VALUES ('analyzer', ?)", (ANALYZER.key,))
    return int(await db.value('SELECT count(*) FROM documents'))
