"""Keeping the BM25 index in step with the log, inside the caller's write transaction (PostgreSQL).

The model is `_sqlite_index`'s exactly: per-tenant documents keyed by content hash, postings,
membership at the first entry where a document appeared, and `membership_order` for `reindex`.

What PostgreSQL adds is concurrency. SQLite serialises every write; here writers to different
tenants run side by side, and writers to one tenant are serialised by `lock_tenants`, which every
write takes right after locking its conversation row and before touching entries or the index:

- documents are deduplicated per tenant by reading then inserting, which is only sound if no
  other writer of the tenant is between those two statements;
- `doc_id`s are then allocated in the order writes happened, the ranking tie-break `reindex`
  reproduces;
- the tenant's counters change on every write anyway, so their row lock would serialise the end
  of every write of a tenant regardless;
- one lock order (conversation row, tenant rows by id, then entries) cannot deadlock with a
  delete, which frees entries only while holding the tenant lock.

The shared tables every tenant writes to (`terms`, `runs`) are inserted in sorted order with
`ON CONFLICT DO NOTHING`, so two writers adding the same new words queue in one order and never
deadlock; the loser just reads the winner's ids.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Literal, TypeVar

from temporal_recall.content import load_message
from temporal_recall.text._analyzer import ANALYZER

from ._postgres_db import Conn, fetch_int
from ._rows import Member, membership_order
from ._serialization import IndexTerms, decode_term_ids, encode_term_ids, index_terms, scope_key

__all__ = (
    'add_members',
    'allocate_keys',
    'chain_members',
    'conversation_tips',
    'index_conversation',
    'intern_runs',
    'lock_tenants',
    'rebuild_index',
    'release_members',
    'tenant_of',
)

_CHUNK = 5000
_T = TypeVar('_T')


def _chunks(items: Sequence[_T], size: int = _CHUNK) -> Iterable[Sequence[_T]]:
    return (items[start : start + size] for start in range(0, len(items), size))


async def allocate_keys(conn: Conn, table: Literal['entries', 'documents'], count: int) -> list[int]:
    """`count` fresh keys of `table`'s identity column, ascending: rows inserted with them keep allocation order."""
    if count == 0:
        return []
    column = 'entry_key' if table == 'entries' else 'doc_id'
    rows = await conn.fetch(
        'SELECT nextval(pg_get_serial_sequence($1, $2)) FROM generate_series(1, $3)', table, column, count
    )
    return sorted(int(row[0]) for row in rows)


async def tenant_of(conn: Conn, scope: str | None) -> int:
    """The tenant id of `scope`, created on first use (a concurrent creator's row is read back)."""
    key = scope_key(scope)
    found = await conn.fetchval('SELECT tenant_id FROM tenants WHERE scope_key = $1', key)
    if found is None:
        found = await conn.fetchval(
            'INSERT INTO tenants (scope_key) VALUES ($1) ON CONFLICT (scope_key) DO NOTHING RETURNING tenant_id', key
        )
    if found is None:  # Another transaction created it; our insert waited for its commit, so we can see it now.
        return await fetch_int(conn, 'SELECT tenant_id FROM tenants WHERE scope_key = $1', key)
    return int(found)


async def lock_tenants(conn: Conn, tenant_ids: Iterable[int]) -> None:
    """Lock tenant rows in id order until the transaction ends: one writer per tenant at a time (module doc)."""
    await conn.execute(
        'SELECT 1 FROM tenants WHERE tenant_id = ANY($1::bigint[]) ORDER BY tenant_id FOR UPDATE',
        sorted(set(tenant_ids)),
    )


async def _intern(conn: Conn, table: str, values: Iterable[str]) -> dict[str, int]:
    """`value -> key` in `terms` or `runs`, inserting missing values in sorted order (see module doc)."""
    column, key = ('term', 'term_id') if table == 'terms' else ('run_id', 'run_key')
    wanted = sorted(set(values))
    ids: dict[str, int] = {}
    for chunk in _chunks(wanted):
        rows = await conn.fetch(
            f'SELECT {column}, {key} FROM {table} WHERE {column} = ANY($1::text[])',  # noqa: S608 (fixed names)
            list(chunk),
        )
        ids.update((str(row[0]), int(row[1])) for row in rows)
        missing = [value for value in chunk if value not in ids]
        if not missing:
            continue
        rows = await conn.fetch(
            f'INSERT INTO {table} ({column}) SELECT v FROM unnest($1::text[]) AS v ORDER BY v COLLATE "C" '  # noqa: S608
            f'ON CONFLICT ({column}) DO NOTHING RETURNING {column}, {key}',
            missing,
        )
        ids.update((str(row[0]), int(row[1])) for row in rows)
        late = [value for value in missing if value not in ids]
        if late:  # Inserted by a concurrent transaction that has committed since.
            rows = await conn.fetch(
                f'SELECT {column}, {key} FROM {table} WHERE {column} = ANY($1::text[])',  # noqa: S608 (fixed names)
                late,
            )
            ids.update((str(row[0]), int(row[1])) for row in rows)
    return ids


async def intern_runs(conn: Conn, run_ids: Iterable[str | None]) -> dict[str, int]:
    return await _intern(conn, 'runs', (run_id for run_id in run_ids if run_id is not None))


async def _documents_by_hash(conn: Conn, tenant_id: int, hashes: Sequence[bytes]) -> dict[bytes, tuple[int, int]]:
    """`content_hash -> (doc_id, length)` of the tenant's documents among `hashes`."""
    found: dict[bytes, tuple[int, int]] = {}
    for chunk in _chunks(hashes):
        rows = await conn.fetch(
            'SELECT content_hash, doc_id, length FROM documents '
            'WHERE tenant_id = $1 AND content_hash = ANY($2::bytea[])',
            tenant_id,
            list(chunk),
        )
        found.update((bytes(row[0]), (int(row[1]), int(row[2]))) for row in rows)
    return found


async def _terms_of(conn: Conn, members: Sequence[Member]) -> list[tuple[Member, IndexTerms]]:
    """The indexable members among `members` with their terms, read back from the log when not prepared."""
    stored: dict[int, str] = {}
    unprepared = [member.entry_key for member in members if member.prepared is None]
    for chunk in _chunks(unprepared, 500):
        rows = await conn.fetch(
            'SELECT entry_key, message FROM entries WHERE entry_key = ANY($1::bigint[])', list(chunk)
        )
        stored.update((int(row[0]), str(row[1])) for row in rows)
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
    conn: Conn, tenant_id: int, new: Sequence[tuple[Member, IndexTerms]]
) -> dict[bytes, tuple[int, int]]:
    """Create the documents (and postings) for `new`, numbered in its order; `content_hash -> (doc_id, length)`.

    One statement inserts both: the documents take their ids from the identity as `unnest` yields
    them, in `new`'s order, and the postings join them back by content hash. A new document is
    created for the member about to join it, so it starts with one reference. The tenant's counters
    are the caller's (`_join`), in its one closing statement.
    """
    if not new:
        return {}
    term_ids = await _intern(conn, 'terms', (word for _, terms in new for word in terms.frequencies))
    postings = [
        (member.content_hash, term_ids[word], frequency, terms.length)
        for member, terms in new
        for word, frequency in terms.frequencies.items()
    ]
    rows = await conn.fetch(
        """
        WITH created AS (
            INSERT INTO documents (tenant_id, content_hash, length, refs, term_ids, role)
            SELECT $1, h, l, 1, t, r FROM unnest($2::bytea[], $3::int[], $4::bytea[], $9::text[]) AS x(h, l, t, r)
            RETURNING doc_id, content_hash
        ), posted AS (
            INSERT INTO postings (tenant_id, term_id, doc_id, term_frequency, length)
            SELECT $1, y.term_id, created.doc_id, y.frequency, y.length
            FROM unnest($5::bytea[], $6::bigint[], $7::int[], $8::int[]) AS y(h, term_id, frequency, length)
            JOIN created ON created.content_hash = y.h
        )
        SELECT doc_id, content_hash FROM created ORDER BY doc_id
        """,
        tenant_id,
        [member.content_hash for member, _ in new],
        [terms.length for _, terms in new],
        [encode_term_ids([term_ids[word] for word in terms.frequencies]) for _, terms in new],
        *(list(column) for column in zip(*postings, strict=True)),
        [terms.role for _, terms in new],
    )
    counts = sorted(Counter(term_ids[word] for _, terms in new for word in terms.frequencies).items())
    # Rows in term order, as every writer takes them, so two writers sharing terms cannot deadlock.
    await conn.execute(
        'INSERT INTO term_documents (tenant_id, term_id, document_count) '
        'SELECT $1, x.term_id, x.count FROM unnest($2::bigint[], $3::bigint[]) AS x(term_id, count) '
        'ORDER BY x.term_id '
        'ON CONFLICT (tenant_id, term_id) DO UPDATE '
        'SET document_count = term_documents.document_count + excluded.document_count',
        tenant_id,
        [term_id for term_id, _ in counts],
        [count for _, count in counts],
    )
    created = {bytes(row[1]): int(row[0]) for row in rows}
    return {member.content_hash: (created[member.content_hash], terms.length) for member, terms in new}


async def _join(
    conn: Conn,
    conv_key: int,
    tenant_id: int,
    joining: Sequence[tuple[Member, int, int, int]],
    existing: Sequence[int],
    created: tuple[int, int],
) -> None:
    """In one statement: membership rows (with their occurrence counts), a reference more on `existing`
    documents, and the counters of the conversation and of the tenant (`created` = count and total
    length of the documents just made)."""
    await conn.execute(
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
        [doc_id for _, doc_id, _, _ in joining],
        [member.entry_key for member, _, _, _ in joining],
        [member.run_key for member, _, _, _ in joining],
        [member.position for member, _, _, _ in joining],
        list(existing),
        created[0],
        created[1],
        len(joining),
        sum(length for _, _, length, _ in joining),
        [count for _, _, _, count in joining],
    )


async def add_members(conn: Conn, conv_key: int, tenant_id: int, members: Sequence[Member]) -> None:
    """Index `members` (in order) into the conversation, creating the tenant's documents they lack.

    Same rules as `_sqlite_index.add_members`: documents are created in the order their content first
    occurs, summaries and wordless messages are skipped, a document already a member keeps the entry
    where it first appeared, and the membership counts the entries holding the document. The caller
    holds the tenant's lock.
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
    docs = await _documents_by_hash(conn, tenant_id, list(first))
    held: set[int] = set()
    if docs:
        held = {
            int(row[0])
            for row in await conn.fetch(
                'SELECT doc_id FROM conversation_documents WHERE conv_key = $1 AND doc_id = ANY($2::bigint[])',
                conv_key,
                [doc_id for doc_id, _ in docs.values()],
            )
        }
    existing = [doc_id for doc_id, _ in docs.values() if doc_id not in held]
    new = await _terms_of(conn, [member for content, member in first.items() if content not in docs])
    created = await _create_documents(conn, tenant_id, new)
    docs.update(created)
    again = [(docs[content][0], counts[content]) for content in first if content in docs and docs[content][0] in held]
    if again:
        await conn.execute(
            'UPDATE conversation_documents cd SET occurrences = cd.occurrences + x.count '
            'FROM unnest($2::bigint[], $3::int[]) AS x(doc_id, count) WHERE cd.conv_key = $1 AND cd.doc_id = x.doc_id',
            conv_key,
            [doc_id for doc_id, _ in again],
            [count for _, count in again],
        )
    joining = [
        (member, *docs[content], counts[content])
        for content, member in first.items()
        if content in docs and docs[content][0] not in held
    ]
    if joining:
        totals = (len(created), sum(length for _, length in created.values()))
        await _join(conn, conv_key, tenant_id, joining, existing, totals)


async def release_members(conn: Conn, conv_key: int) -> None:
    """Drop the conversation's membership, and the documents (with postings) no other conversation holds."""
    held = [
        int(row[0])
        for row in await conn.fetch('DELETE FROM conversation_documents WHERE conv_key = $1 RETURNING doc_id', conv_key)
    ]
    await conn.execute('UPDATE conversations SET document_count = 0, total_length = 0 WHERE conv_key = $1', conv_key)
    if not held:
        return
    orphans = await conn.fetch(
        'UPDATE documents SET refs = refs - 1 WHERE doc_id = ANY($1::bigint[]) '
        'RETURNING doc_id, tenant_id, length, term_ids, refs',
        held,
    )
    orphans = [row for row in orphans if row[4] <= 0]
    if not orphans:
        return
    doomed = [(int(row[1]), term_id, int(row[0])) for row in orphans for term_id in decode_term_ids(bytes(row[3]))]
    await conn.execute(
        'DELETE FROM postings p '
        'USING unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS d(tenant_id, term_id, doc_id) '
        'WHERE p.tenant_id = d.tenant_id AND p.term_id = d.term_id AND p.doc_id = d.doc_id',
        *(list(column) for column in zip(*doomed, strict=True)),
    )
    emptied = sorted(Counter((tenant_id, term_id) for tenant_id, term_id, _ in doomed).items())
    tenants, terms, counts = [key[0] for key, _ in emptied], [key[1] for key, _ in emptied], [n for _, n in emptied]
    # Lock the rows in term order first (see `_create_documents`), then count down and drop the zeros.
    await conn.execute(
        'SELECT 1 FROM term_documents s JOIN unnest($1::bigint[], $2::bigint[]) AS d(tenant_id, term_id) '
        'ON s.tenant_id = d.tenant_id AND s.term_id = d.term_id ORDER BY s.tenant_id, s.term_id FOR UPDATE OF s',
        tenants,
        terms,
    )
    await conn.execute(
        'UPDATE term_documents s SET document_count = s.document_count - d.count '
        'FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS d(tenant_id, term_id, count) '
        'WHERE s.tenant_id = d.tenant_id AND s.term_id = d.term_id',
        tenants,
        terms,
        counts,
    )
    await conn.execute(
        'DELETE FROM term_documents s USING unnest($1::bigint[], $2::bigint[]) AS d(tenant_id, term_id) '
        'WHERE s.tenant_id = d.tenant_id AND s.term_id = d.term_id AND s.document_count <= 0',
        tenants,
        terms,
    )
    await conn.execute('DELETE FROM documents WHERE doc_id = ANY($1::bigint[])', [int(row[0]) for row in orphans])
    released: dict[int, tuple[int, int]] = {}
    for row in orphans:
        count, total = released.get(int(row[1]), (0, 0))
        released[int(row[1])] = (count + 1, total + int(row[2]))
    await conn.execute(
        'UPDATE tenants t SET document_count = t.document_count - r.count, total_length = t.total_length - r.total '
        'FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS r(tenant_id, count, total) '
        'WHERE t.tenant_id = r.tenant_id',
        list(released),
        [count for count, _ in released.values()],
        [total for _, total in released.values()],
    )


async def conversation_tips(conn: Conn, conv_key: int) -> list[int]:
    """The entry keys a conversation reaches its history from: its head and the tips of its branches."""
    rows = await conn.fetch(
        'SELECT head_key FROM conversations WHERE conv_key = $1 AND head_key IS NOT NULL '
        'UNION SELECT entry_key FROM conversation_branches WHERE conv_key = $1',
        conv_key,
    )
    return [int(row[0]) for row in rows]


async def chain_members(conn: Conn, tips: Sequence[int]) -> list[Member]:
    """Every entry reachable from `tips` (through parent links), in entry-key order."""
    if not tips:
        return []
    rows = await conn.fetch(
        """
        WITH RECURSIVE reach(k) AS (
            SELECT unnest($1::bigint[])
            UNION
            SELECT e.parent_key FROM reach JOIN entries e ON e.entry_key = reach.k WHERE e.parent_key IS NOT NULL
        )
        SELECT e.entry_key, e.position, e.run_key, e.content_hash, e.unindexed
        FROM reach JOIN entries e ON e.entry_key = reach.k
        ORDER BY e.entry_key
        """,
        list(tips),
    )
    return [
        Member(entry_key=row[0], position=row[1], run_key=row[2], content_hash=bytes(row[3]), unindexed=bool(row[4]))
        for row in rows
    ]


async def index_conversation(
    conn: Conn, conv_key: int, tenant_id: int, known: Mapping[int, Member] | None = None
) -> None:
    """Index everything the conversation reaches, in entry-key order: for a conversation created over stored
    entries. `known` are members this transaction prepared (their terms are not read back from the log)."""
    members = await chain_members(conn, await conversation_tips(conn, conv_key))
    if known:
        members = [known.get(member.entry_key, member) for member in members]
    await add_members(conn, conv_key, tenant_id, members)


async def rebuild_index(conn: Conn, progress: Callable[[int, int], None] | None = None) -> int:
    """Drop the index and rebuild it from the log, in membership-event order, with this release's analyzer
    (recorded in `index_settings`). Returns the document count.

    Holds EXCLUSIVE locks on the store's tables for the whole rebuild: readers go on, writers wait.
    """
    await conn.execute(
        'LOCK TABLE tenants, conversations, conversation_branches, entries, runs, documents, terms, postings, '
        'term_documents, conversation_documents, index_settings IN EXCLUSIVE MODE'
    )
    for statement in (
        'DELETE FROM postings',
        'DELETE FROM term_documents',
        'DELETE FROM conversation_documents',
        'DELETE FROM documents',
        'DELETE FROM terms',
        "SELECT setval(pg_get_serial_sequence('documents', 'doc_id'), 1, false)",
        "DELETE FROM index_settings WHERE name = 'analyzer'",
        'UPDATE tenants SET document_count = 0, total_length = 0',
        'UPDATE conversations SET document_count = 0, total_length = 0',
        'DELETE FROM runs r WHERE NOT EXISTS (SELECT 1 FROM entries e WHERE e.run_key = r.run_key)',
        'DELETE FROM tenants t WHERE NOT EXISTS (SELECT 1 FROM conversations c WHERE c.tenant_id = t.tenant_id)',
    ):
        await conn.execute(statement)
    events: list[tuple[tuple[int, int, int, int], int, int, Member]] = []
    for row in await conn.fetch('SELECT conv_key, tenant_id, created_seq FROM conversations ORDER BY conv_key'):
        conv_key, tenant_id, created_seq = int(row[0]), int(row[1]), int(row[2])
        for member in await chain_members(conn, await conversation_tips(conn, conv_key)):
            events.append((membership_order(member.entry_key, conv_key, created_seq), conv_key, tenant_id, member))
    events.sort(key=lambda event: event[0])
    total = len(events)
    if progress is not None:
        progress(0, total)
    done = 0
    while done < total:
        _, conv_key, tenant_id, _ = events[done]
        batch: list[Member] = []
        while done < total and events[done][1] == conv_key and len(batch) < _CHUNK:
            batch.append(events[done][3])
            done += 1
        await add_members(conn, conv_key, tenant_id, batch)
        if progress is not None:
            progress(done, total)
    await conn.execute("INSERT INTO index_settings (name, value) VALUES ('analyzer', $1)", ANALYZER.key)
    return await fetch_int(conn, 'SELECT count(*) FROM documents')
