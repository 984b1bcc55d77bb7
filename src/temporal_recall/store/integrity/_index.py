"""The index's checks: documents, postings, segments, memberships, marks and counters, against the log.
More in docs/design/store.md.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from temporal_recall.content import load_message

from ..index._terms import decode_term_ids, index_documents
from ..postings._blocks import decode
from ..protocol import Posting
from ..sql._session import Session
from ._report import CheckReport, stored_bytes

__all__ = ('check_index',)


async def check_index(session: Session, report: CheckReport) -> None:
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
        content = (int(document[1]), stored_bytes(document[2]))
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
    await _superseded(session, report)
    await _counters(session, report)
    await _vector_counts(session, report)


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
        return decode(first_doc, stored_bytes(stored))
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
    listed = set(decode_term_ids(stored_bytes(term_ids)))
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
        elif stored_bytes(entry_hash) != stored_bytes(stored_hash):
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
        held[int(conv_key), stored_bytes(content)] = int(count)
    for conversation_id, conv_key, doc_id, occurrences, content in await session.rows(
        'SELECT c.conversation_id, cd.conv_key, cd.doc_id, cd.occurrences, d.content_hash '
        'FROM conversation_documents cd JOIN conversations c ON c.conv_key = cd.conv_key '
        'JOIN documents d ON d.doc_id = cd.doc_id',
    ):
        actual = held.get((int(conv_key), stored_bytes(content)), 0)
        if occurrences != actual:
            report.add(
                'index',
                f'document {doc_id} in conversation {conversation_id!r}',
                f'counts {occurrences} occurrences, but {actual} indexed entries of the conversation hold it',
            )


@dataclass
class _EntryTree:
    """The whole entry log in memory: each entry's parent, children and searchable content."""

    parents: dict[int, int | None] = field(default_factory=dict[int, int | None])
    children: defaultdict[int, list[int]] = field(default_factory=lambda: defaultdict[int, list[int]](list))
    contents: dict[int, bytes | None] = field(default_factory=dict[int, bytes | None])

    @classmethod
    async def read(cls, session: Session) -> _EntryTree:
        tree = cls()
        for key, parent, content, unindexed in await session.rows(
            'SELECT entry_key, parent_key, content_hash, unindexed FROM entries'
        ):
            tree.parents[int(key)] = None if parent is None else int(parent)
            tree.contents[int(key)] = None if unindexed else stored_bytes(content)
            if parent is not None:
                tree.children[int(parent)].append(int(key))
        return tree

    def ancestry(self, tip: int | None) -> set[int]:
        """`tip` and every entry above it."""
        seen: set[int] = set()
        while tip is not None and tip not in seen:
            seen.add(tip)
            tip = self.parents.get(tip)
        return seen

    def below(self, roots: list[int]) -> set[int]:
        """The `roots` and every entry under them."""
        found: set[int] = set()
        pending = list(roots)
        while pending:
            key = pending.pop()
            if key not in found:
                found.add(key)
                pending.extend(self.children.get(key, ()))
        return found

    def held(self, keys: set[int]) -> set[bytes]:
        return {content for key in keys if (content := self.contents.get(key)) is not None}


async def _hidden_contents(session: Session) -> dict[int, set[bytes]]:
    """Per conversation, the contents only superseded entries hold: at or below an entry recorded in
    `superseded_entries`, off the head's history, and held by no other entry the conversation reaches."""
    tree = await _EntryTree.read(session)
    roots: dict[int, list[int]] = defaultdict(list)
    for conv_key, entry_key in await session.rows('SELECT conv_key, entry_key FROM superseded_entries'):
        roots[int(conv_key)].append(int(entry_key))
    tips: dict[int, list[int]] = defaultdict(list)
    for conv_key, entry_key in await session.rows('SELECT conv_key, entry_key FROM conversation_branches'):
        tips[int(conv_key)].append(int(entry_key))
    hidden_contents: dict[int, set[bytes]] = {}
    for conv_key, head_key in await session.rows('SELECT conv_key, head_key FROM conversations'):
        if not roots.get(int(conv_key)):
            hidden_contents[int(conv_key)] = set()
            continue
        on_head = tree.ancestry(None if head_key is None else int(head_key))
        reach = set(on_head).union(*(tree.ancestry(tip) for tip in tips[int(conv_key)]))
        hidden = tree.below(roots[int(conv_key)]) - on_head
        hidden_contents[int(conv_key)] = tree.held(hidden) - tree.held(reach - hidden)
    return hidden_contents


async def _superseded(session: Session, report: CheckReport) -> None:
    """A member is marked `superseded` exactly when every entry of its conversation holding it is superseded
    (`index._superseded`), computed here from the log in memory, independently of the statement that keeps
    the marks."""
    hidden_contents = await _hidden_contents(session)
    for conversation_id, conv_key, doc_id, superseded, content in await session.rows(
        'SELECT c.conversation_id, cd.conv_key, cd.doc_id, cd.superseded, d.content_hash '
        'FROM conversation_documents cd JOIN conversations c ON c.conv_key = cd.conv_key '
        'JOIN documents d ON d.doc_id = cd.doc_id',
    ):
        expected = stored_bytes(content) in hidden_contents.get(int(conv_key), set())
        if bool(superseded) != expected:
            report.add(
                'index',
                f'document {doc_id} in conversation {conversation_id!r}',
                'is marked superseded, but an entry of the conversation that no retry replaced holds it'
                if superseded
                else 'is searchable by default, but only entries a retried request replaced hold it',
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
        '(SELECT count(*) FROM conversation_documents cd WHERE cd.conv_key = c.conv_key AND NOT cd.superseded), '
        '(SELECT coalesce(sum(d.length), 0) FROM conversation_documents cd JOIN documents d ON d.doc_id = cd.doc_id '
        'WHERE cd.conv_key = c.conv_key AND NOT cd.superseded) FROM conversations c',
    ):
        if (stored_count, stored_length) != (count, length):
            report.add(
                'index',
                f'conversation {conversation_id!r}',
                f'counts {stored_count} documents of total length {stored_length}; stored: {count} and {length}',
            )


async def _vector_counts(session: Session, report: CheckReport) -> None:
    """What `vector_counts` holds per tenant against the vectors stored: a search by meaning trusts it to
    tell whether the codes it holds are current."""
    for tenant_id, counted, stored in await session.rows(
        'SELECT tenant_id, sum(counted), sum(stored) FROM ('
        'SELECT tenant_id, vectors AS counted, 0 AS stored FROM vector_counts '
        'UNION ALL SELECT tenant_id, 0, 1 FROM document_vectors) AS x GROUP BY tenant_id ORDER BY tenant_id',
    ):
        if int(counted) != int(stored):
            report.add('index', f'vector_counts (tenant {tenant_id})', f'counts {counted} vectors; stored: {stored}')
