"""`recall check`: an integrity check of a store, written once for both backends. More in docs/store.md."""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from temporal_recall._body_references import references_in
from temporal_recall.content import content_hash, load_message

from .index._terms import decode_term_ids, index_documents
from .postings._blocks import decode
from .protocol import Posting
from .sql._keys import hash_bytes, scope_key
from .sql._session import Session

__all__ = ('CHECK_STEPS', 'CheckReport', 'Finding', 'FindingKind', 'run_check')

FindingKind = Literal['chain', 'content_hash', 'scope', 'index', 'body']
"""What a finding is about (see the module notes)."""

CHECK_STEPS = ('checking entries and chains', 'checking conversations', 'checking the index', 'checking message bodies')
"""What `run_check` reports to its `progress` callback, in order."""

_PAGE = 1000
"""Entries read per query, so checking a large log never holds all of it at once."""


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One problem: what kind, where (table and key), and what is wrong."""

    kind: FindingKind
    location: str
    detail: str

    def __str__(self) -> str:
        return f'{self.kind}: {self.location}: {self.detail}'


@dataclass(kw_only=True)
class CheckReport:
    """What a check found, with the sizes it covered."""

    findings: list[Finding] = field(default_factory=list[Finding])
    conversations: int = 0
    entries: int = 0
    documents: int = 0
    postings: int = 0
    bodies: int = 0

    @property
    def clean(self) -> bool:
        return not self.findings

    def add(self, kind: FindingKind, location: str, detail: str) -> None:
        self.findings.append(Finding(kind=kind, location=location, detail=detail))


async def run_check(session: Session, progress: Callable[[str], None] | None = None) -> CheckReport:
    """Check every rule in the module notes; the report lists each violation found."""
    report = CheckReport()

    def say(step: str) -> None:
        if progress is not None:
            progress(step)

    entries, conversations, index, bodies = CHECK_STEPS
    say(entries)
    await _entries(session, report)
    say(conversations)
    await _conversations(session, report)
    say(index)
    await _index(session, report)
    say(bodies)
    await _bodies(session, report)
    return report


async def _entries(session: Session, report: CheckReport) -> None:
    after = 0
    while True:
        rows = await session.rows(
            'SELECT e.entry_key, e.entry_id, e.parent_key, e.position, p.entry_key, p.position, e.content_hash, '
            'e.message FROM entries e LEFT JOIN entries p ON p.entry_key = e.parent_key '
            'WHERE e.entry_key > $1 ORDER BY e.entry_key LIMIT $2',
            after,
            _PAGE,
        )
        for _, entry_id, parent_key, position, found_parent, parent_position, stored_hash, message in rows:
            where = f'entry {entry_id!r}'
            if parent_key is None:
                if position != 0:
                    report.add('chain', where, f'has no parent but position {position}, not 0')
            elif found_parent is None:
                report.add('chain', where, f'names parent key {parent_key}, which is not stored')
            elif position != parent_position + 1:
                report.add('chain', where, f'is at position {position} under a parent at {parent_position}')
            try:
                actual = hash_bytes(content_hash(load_message(message)))
            except ValueError as error:
                report.add('content_hash', where, f'holds a message that cannot be read ({error})')
                continue
            if _bytes(stored_hash) != actual:
                report.add('content_hash', where, 'holds a message whose hash is not the stored content hash')
        report.entries += len(rows)
        if len(rows) < _PAGE:
            return
        after = rows[-1][0]


async def _conversations(session: Session, report: CheckReport) -> None:
    rows = await session.rows(
        'SELECT c.conversation_id, c.scope, t.scope_key, c.head_key, h.entry_key FROM conversations c '
        'LEFT JOIN tenants t ON t.tenant_id = c.tenant_id LEFT JOIN entries h ON h.entry_key = c.head_key',
    )
    report.conversations = len(rows)
    for conversation_id, scope, tenant_key, head_key, found_head in rows:
        where = f'conversation {conversation_id!r}'
        if tenant_key != scope_key(scope):
            report.add('scope', where, f'has scope {scope!r} but is filed under tenant {tenant_key!r}')
        if head_key is not None and found_head is None:
            report.add('chain', where, f'has head key {head_key}, which is not stored')
    for conversation_id, entry_key in await session.rows(
        'SELECT c.conversation_id, b.entry_key FROM conversation_branches b '
        'JOIN conversations c ON c.conv_key = b.conv_key LEFT JOIN entries e ON e.entry_key = b.entry_key '
        'WHERE e.entry_key IS NULL',
    ):
        report.add('chain', f'conversation {conversation_id!r}', f'keeps branch key {entry_key}, which is not stored')


async def _index(session: Session, report: CheckReport) -> None:
    documents = {
        int(row[0]): row
        for row in await session.rows('SELECT doc_id, tenant_id, content_hash, length, term_ids, role FROM documents')
    }
    report.documents = len(documents)
    postings: dict[int, dict[int, tuple[int, int, int]]] = defaultdict(dict)
    per_term: Counter[tuple[int, int]] = Counter()
    for tenant_id, term_id, doc_id, frequency, length in await _postings(session, report):
        report.postings += 1
        document = documents.get(doc_id)
        where = f'posting (tenant {tenant_id}, term {term_id}, document {doc_id})'
        if document is None:
            report.add('index', where, 'names a document that is not stored')
            continue
        if document[1] != tenant_id:
            report.add('scope', where, f'is filed under tenant {tenant_id}, its document under tenant {document[1]}')
        if term_id in postings[doc_id]:
            report.add('index', where, 'is stored twice (in two blocks or segments)')
        postings[doc_id][term_id] = (frequency, length, tenant_id)
        per_term[tenant_id, term_id] += 1
    # A term's count is what merges folded plus its postings in segments (`postings._segments`).
    counted: Counter[tuple[int, int]] = Counter(await _pending_counts(session))
    for row in await session.rows('SELECT tenant_id, term_id, document_count FROM term_documents'):
        counted[int(row[0]), int(row[1])] += int(row[2])
    for key in sorted(counted.keys() | per_term.keys()):
        if counted.get(key, 0) != per_term.get(key, 0):
            report.add(
                'index',
                f'term_documents (tenant {key[0]}, term {key[1]})',
                f'counts {counted.get(key, 0)} documents, but {per_term.get(key, 0)} postings hold the term',
            )
    terms = {str(row[0]): int(row[1]) for row in await session.rows('SELECT term, term_id FROM terms')}
    members: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    for row in await session.rows(
        'SELECT cd.doc_id, cd.conv_key, c.conversation_id, c.tenant_id, e.entry_id, e.content_hash, e.message '
        'FROM conversation_documents cd JOIN conversations c ON c.conv_key = cd.conv_key '
        'LEFT JOIN entries e ON e.entry_key = cd.entry_key',
    ):
        members[int(row[0])].append(tuple(row))
    speakers: dict[tuple[int, bytes], set[str]] = defaultdict(set)
    said: dict[tuple[int, bytes], set[str]] = {}
    for doc_id, document in documents.items():
        content = (int(document[1]), _bytes(document[2]))
        speakers[content].add(str(document[5]))
        expected = _document(report, doc_id, document, postings.get(doc_id, {}), members.get(doc_id, []), terms)
        if expected is not None:
            said[content] = expected
    for (tenant_id, content), roles in said.items():
        if speakers[tenant_id, content] != roles:
            report.add(
                'index',
                f'content {content.hex()[:16]}… (tenant {tenant_id})',
                f'has documents of {sorted(speakers[tenant_id, content])}, its text speakers {sorted(roles)}',
            )
    for doc_id in members.keys() - documents.keys():
        report.add('index', f'document {doc_id}', 'has memberships but is not stored')
    await _occurrences(session, report)
    await _current(session, report)
    await _counters(session, report)


_BLOCK_ROWS = (
    'SELECT tenant_id, term_id, first_doc, last_doc, count, postings FROM posting_blocks '
    'ORDER BY tenant_id, term_id, first_doc'
)


async def _postings(session: Session, report: CheckReport) -> list[tuple[int, int, int, int, int]]:
    """Every posting `(tenant_id, term_id, doc_id, term_frequency, length)`, its block checked first."""
    found: list[tuple[int, int, int, int, int]] = []
    ends: dict[tuple[int, int], int] = {}  # Each list's last document, which its pending postings follow.
    previous: tuple[int, int, int] | None = None
    for row in await session.rows(_BLOCK_ROWS):
        tenant_id, term_id, first_doc, last_doc, count, stored = row
        where = f'block (tenant {tenant_id}, term {term_id}, from document {first_doc})'
        postings = _decoded(report, where, first_doc, stored, 'holds')
        if postings is None:
            continue
        doc_ids = [posting.doc_id for posting in postings]
        if not _ascending(doc_ids, last_doc):
            report.add('index', where, f'holds documents {doc_ids[:5]}… out of order or past {last_doc}')
        elif previous is not None and previous[:2] == (tenant_id, term_id) and first_doc <= previous[2]:
            report.add('index', where, f'overlaps the block before it, which ends at document {previous[2]}')
        if count != len(postings) or not postings:
            report.add('index', where, f'says it holds {count} postings; it holds {len(postings)}')
        previous = (tenant_id, term_id, last_doc)
        if postings:
            ends[tenant_id, term_id] = doc_ids[-1]
        found.extend((tenant_id, term_id, doc_id, frequency, length) for doc_id, frequency, length in postings)
    return found + await _pending_postings(session, report, ends)


def _decoded(report: CheckReport, where: str, first_doc: int, stored: Any, verb: str) -> list[Posting] | None:
    """A stored row's postings, or `None` with a finding if they do not decode."""
    try:
        return decode(first_doc, _bytes(stored))
    except ValueError:
        report.add('index', where, f'{verb} postings that do not decode')
        return None


def _ascending(doc_ids: list[int], last_doc: int) -> bool:
    """Whether a stored row's documents are distinct, ascending and none past its `last_doc`."""
    return bool(doc_ids) and doc_ids == sorted(set(doc_ids)) and doc_ids[-1] <= last_doc


async def _pending_postings(
    session: Session, report: CheckReport, ends: dict[tuple[int, int], int]
) -> list[tuple[int, int, int, int, int]]:
    """Every posting in a segment (`postings._segments`), each row checked, and each segment's statistics
    against its rows and documents. A segment's documents may lie below its terms' blocks (a write
    that committed after a merge of later ones), so `ends` bounds nothing here."""
    del ends
    found: list[tuple[int, int, int, int, int]] = []
    held: dict[tuple[int, int], set[int]] = defaultdict(set)
    counted: Counter[tuple[int, int]] = Counter()
    for tenant_id, segment, term_id, first_doc, last_doc, stored in await session.rows(
        'SELECT tenant_id, segment, term_id, first_doc, last_doc, postings FROM pending_postings '
        'ORDER BY tenant_id, term_id, segment, first_doc'
    ):
        where = f'pending postings (tenant {tenant_id}, segment {segment}, term {term_id}, from document {first_doc})'
        postings = _decoded(report, where, first_doc, stored, 'hold')
        if postings is None:
            continue
        doc_ids = [posting.doc_id for posting in postings]
        if not _ascending(doc_ids, last_doc) or doc_ids[0] < segment:
            report.add(
                'index', where, f'hold documents {doc_ids[:5]}… out of order, past {last_doc} or below the segment'
            )
        held[tenant_id, segment].update(doc_ids)
        counted[tenant_id, segment] += len(postings)
        found.extend((tenant_id, term_id, p.doc_id, p.term_frequency, p.length) for p in postings)
    lengths = {int(row[0]): int(row[1]) for row in await session.rows('SELECT doc_id, length FROM documents')}
    for tenant_id, segment, stored_count, stored_length, stored_postings in await session.rows(
        'SELECT tenant_id, segment, document_count, total_length, postings FROM index_segments'
    ):
        documents = held.pop((tenant_id, segment), set())
        count, length = len(documents), sum(lengths.get(doc_id, 0) for doc_id in documents)
        if (stored_count, stored_length, stored_postings) != (count, length, counted[tenant_id, segment]) or (
            documents and min(documents) != segment
        ):
            report.add(
                'index',
                f'segment {segment} of tenant {tenant_id}',
                f'counts {stored_count} documents of total length {stored_length} in {stored_postings} postings; '
                f'stored: {count}, {length} and {counted[tenant_id, segment]}, '
                f'from document {min(documents, default=None)}',
            )
    for tenant_id, segment in sorted(held):
        report.add('index', f'pending postings (tenant {tenant_id}, segment {segment})', 'belong to no segment')
    return found


async def _pending_counts(session: Session) -> dict[tuple[int, int], int]:
    """`(tenant_id, term_id) -> documents` in segments (a document holds a term once: a posting each)."""
    return {
        (int(row[0]), int(row[1])): int(row[2]) // 12
        for row in await session.rows(
            'SELECT tenant_id, term_id, sum(length(postings)) FROM pending_postings GROUP BY tenant_id, term_id'
        )
    }


def _document(
    report: CheckReport,
    doc_id: int,
    document: Sequence[Any],
    postings: dict[int, tuple[int, int, int]],
    members: list[tuple[Any, ...]],
    terms: dict[str, int],
) -> set[str] | None:
    """Check one document; the roles its content's text speaks in (`None` when it has no readable entry)."""
    where = f'document {doc_id}'
    _, tenant_id, stored_hash, length, term_ids, role = document
    if not members:
        report.add('index', where, 'is held by no conversation')
    listed = set(decode_term_ids(_bytes(term_ids)))
    if listed != postings.keys():
        missing, extra = sorted(listed - postings.keys()), sorted(postings.keys() - listed)
        report.add('index', where, f'lists terms without postings {missing} and has postings not listed {extra}')
    source = None
    for _, _, conversation_id, member_tenant, entry_id, entry_hash, message in members:
        member = f'{where} in conversation {conversation_id!r}'
        if member_tenant != tenant_id:
            report.add('scope', member, f'belongs to tenant {tenant_id}, the conversation to tenant {member_tenant}')
        if entry_id is None:
            report.add('index', member, 'names an entry that is not stored')
        elif _bytes(entry_hash) != _bytes(stored_hash):
            report.add('index', member, f'names entry {entry_id!r}, which holds other content')
        elif source is None:
            source = message
    if source is None:
        return None
    try:
        speakers = {spoken.role: spoken for spoken in index_documents(load_message(source))}
    except ValueError:
        return None  # reported with the entry
    expected = speakers.get(role)
    if expected is None:
        said = f'only {", ".join(map(repr, speakers))}' if speakers else 'no one'
        report.add('index', where, f'has role {role!r}, but its text has index terms of {said}')
        return set(speakers)
    if expected.length != length:
        report.add('index', where, f'has length {length}, its text {expected.length}')
    wanted = {terms.get(term, -1): count for term, count in expected.frequencies.items()}
    for term_id, count in sorted(wanted.items()):
        found = postings.get(term_id)
        if found is None:
            report.add('index', where, f'has no posting for term {term_id}, which its text holds {count} times')
        elif found[0] != count or found[1] != expected.length:
            report.add(
                'index',
                where,
                f'posting for term {term_id} says frequency {found[0]} and length {found[1]}, '
                f'its text {count} and {expected.length}',
            )
    for term_id in sorted(postings.keys() - wanted.keys()):
        report.add('index', where, f'has a posting for term {term_id}, which its text does not hold')
    return set(speakers)


async def _occurrences(session: Session, report: CheckReport) -> None:
    held: Counter[tuple[int, bytes]] = Counter()
    for conv_key, content, count in await session.rows(
        'WITH RECURSIVE tips(conv, k) AS ('
        'SELECT conv_key, head_key FROM conversations WHERE head_key IS NOT NULL '
        'UNION SELECT conv_key, entry_key FROM conversation_branches), '
        'reach(conv, k) AS (SELECT conv, k FROM tips UNION '
        'SELECT reach.conv, e.parent_key FROM reach JOIN entries e ON e.entry_key = reach.k '
        'WHERE e.parent_key IS NOT NULL) '
        'SELECT r.conv, e.content_hash, count(*) FROM reach r JOIN entries e ON e.entry_key = r.k '
        'WHERE NOT e.unindexed GROUP BY r.conv, e.content_hash',
    ):
        held[int(conv_key), _bytes(content)] = int(count)
    for conversation_id, conv_key, doc_id, occurrences, content in await session.rows(
        'SELECT c.conversation_id, cd.conv_key, cd.doc_id, cd.occurrences, d.content_hash '
        'FROM conversation_documents cd JOIN conversations c ON c.conv_key = cd.conv_key '
        'JOIN documents d ON d.doc_id = cd.doc_id',
    ):
        actual = held.get((int(conv_key), _bytes(content)), 0)
        if occurrences != actual:
            report.add(
                'index',
                f'document {doc_id} in conversation {conversation_id!r}',
                f'counts {occurrences} occurrences, but {actual} indexed entries of the conversation hold it',
            )


async def _current(session: Session, report: CheckReport) -> None:
    """A member is marked `branch_only` exactly when no indexed entry its conversation's head reaches holds it."""
    on_head = {
        (int(conv_key), _bytes(content))
        for conv_key, content in await session.rows(
            'WITH RECURSIVE reach(conv, k) AS ('
            'SELECT conv_key, head_key FROM conversations WHERE head_key IS NOT NULL '
            'UNION SELECT reach.conv, e.parent_key FROM reach JOIN entries e ON e.entry_key = reach.k '
            'WHERE e.parent_key IS NOT NULL) '
            'SELECT DISTINCT r.conv, e.content_hash FROM reach r JOIN entries e ON e.entry_key = r.k '
            'WHERE NOT e.unindexed',
        )
    }
    for conversation_id, conv_key, doc_id, branch_only, content in await session.rows(
        'SELECT c.conversation_id, cd.conv_key, cd.doc_id, cd.branch_only, d.content_hash '
        'FROM conversation_documents cd JOIN conversations c ON c.conv_key = cd.conv_key '
        'JOIN documents d ON d.doc_id = cd.doc_id',
    ):
        current = (int(conv_key), _bytes(content)) in on_head
        if bool(branch_only) == current:
            report.add(
                'index',
                f'document {doc_id} in conversation {conversation_id!r}',
                'is marked as on a branch only, but the head reaches an entry holding it'
                if current
                else 'is marked as on the current history, but only a branch holds it',
            )


async def _counters(session: Session, report: CheckReport) -> None:
    for tenant_id, scope, stored_count, stored_length, count, length in await session.rows(
        'SELECT t.tenant_id, t.scope_key, '
        't.document_count + (SELECT coalesce(sum(g.document_count), 0) FROM index_segments g '
        'WHERE g.tenant_id = t.tenant_id), '
        't.total_length + (SELECT coalesce(sum(g.total_length), 0) FROM index_segments g '
        'WHERE g.tenant_id = t.tenant_id), '
        '(SELECT count(*) FROM documents d WHERE d.tenant_id = t.tenant_id), '
        '(SELECT coalesce(sum(d.length), 0) FROM documents d WHERE d.tenant_id = t.tenant_id) FROM tenants t',
    ):
        if (stored_count, stored_length) != (count, length):
            report.add(
                'index',
                f'tenant {scope!r} ({tenant_id})',
                f'counts {stored_count} documents of total length {stored_length}; stored: {count} and {length}',
            )
    for conversation_id, stored_count, stored_length, count, length in await session.rows(
        'SELECT c.conversation_id, c.document_count, c.total_length, '
        '(SELECT count(*) FROM conversation_documents cd WHERE cd.conv_key = c.conv_key AND NOT cd.branch_only), '
        '(SELECT coalesce(sum(d.length), 0) FROM conversation_documents cd JOIN documents d ON d.doc_id = cd.doc_id '
        'WHERE cd.conv_key = c.conv_key AND NOT cd.branch_only) FROM conversations c',
    ):
        if (stored_count, stored_length) != (count, length):
            report.add(
                'index',
                f'conversation {conversation_id!r}',
                f'counts {stored_count} documents of total length {stored_length}; stored: {count} and {length}',
            )


async def _bodies(session: Session, report: CheckReport) -> None:
    rows = await session.rows('SELECT scope_key, content_hash, body FROM message_bodies')
    report.bodies = len(rows)
    stored = {(key, digest) for key, digest, _ in rows}
    for key, digest, body in rows:
        where, data = f'message body {digest} (tenant {key!r})', _bytes(body)
        if hashlib.sha256(data).hexdigest() != digest:
            report.add('content_hash', where, 'holds bytes with another SHA-256')
            continue
        try:
            value = json.loads(data)
        except ValueError:
            continue  # Not a body the codec wrote (they are all JSON): it references nothing.
        referenced: set[str] = set()
        references_in(value, referenced)
        for missing in sorted(digest for digest in referenced if (key, digest) not in stored):
            report.add('body', where, f'references body {missing}, which the store does not hold in its scope')


def _bytes(value: Any) -> bytes:
    """A binary column's value; a damaged row may hold text there instead (SQLite keeps whatever was written)."""
    return value.encode() if isinstance(value, str) else bytes(value)
