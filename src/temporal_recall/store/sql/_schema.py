"""The store's tables, written once: each released migration's DDL, rendered per backend by its `Dialect`.
More in docs/design/store.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ._migrations import Migration, released

if TYPE_CHECKING:
    from ._session import Dialect

__all__ = ('CONVERSATION_ID_UNIQUE', 'When', 'render')

CONVERSATION_ID_UNIQUE = 'conversations_conversation_id_unique'
"""The conversation id's unique constraint, named where a backend names it: a lost creation race is
recognised by this name (`log._entries.lost_creation_race`)."""


@dataclass(frozen=True)
class When:
    """A statement for the backends whose dialect has the boolean `flag` set (or, with `unset`, not set)."""

    flag: Literal['constant_column_defaults', 'indexes_entry_hashes', 'appends_in_one_call']
    statement: str
    unset: bool = False


_Statement = str | When


def _documents_table(*, per_role: bool, refs: bool = True) -> str:
    """The `documents` table; from version 9 with a `role` column in its key (a document per speaker),
    from version 11 without `refs` (memberships are counted where a document may go)."""
    with_role = '\n        role TEXT NOT NULL,' if per_role else ''
    key = ', role' if per_role else ''
    counted = '\n        refs INTEGER NOT NULL,' if refs else ''
    return f"""
    CREATE TABLE documents (
        doc_id {{serial}},
        tenant_id {{big}} NOT NULL REFERENCES tenants (tenant_id),
        content_hash {{blob}} NOT NULL,
        length INTEGER NOT NULL,{counted}
        term_ids {{blob}} NOT NULL,{with_role}
        UNIQUE (tenant_id, content_hash{key})
    )
    """


def _pending_postings_table(*, segment: str) -> str:
    """The `pending_postings` table (version 8); from version 11 with 64-bit segment keys (a write's first document)."""
    return f"""
    CREATE TABLE pending_postings (
        tenant_id {{big}} NOT NULL,
        segment {segment} NOT NULL,
        term_id {{big}} NOT NULL,
        first_doc {{big}} NOT NULL,
        last_doc {{big}} NOT NULL,
        postings {{blob}} NOT NULL,
        PRIMARY KEY (tenant_id, segment, term_id, first_doc)
    ){{clustered}}
    """


_V1: tuple[_Statement, ...] = (
    """
    CREATE TABLE tenants (
        tenant_id {rowid},
        scope_key TEXT NOT NULL UNIQUE,
        document_count {big} NOT NULL DEFAULT 0,
        total_length {big} NOT NULL DEFAULT 0
    )
    """,
    'CREATE TABLE runs (run_key {rowid}, run_id TEXT NOT NULL UNIQUE)',
    """
    CREATE TABLE entries (
        entry_key {serial},
        entry_id TEXT NOT NULL UNIQUE,
        parent_key {big} REFERENCES entries (entry_key),
        position INTEGER NOT NULL,
        kind TEXT NOT NULL,
        content_hash {blob} NOT NULL,
        run_key {big} REFERENCES runs (run_key),
        message TEXT NOT NULL
    )
    """,
    'CREATE INDEX entries_by_parent ON entries (parent_key)',
    When('indexes_entry_hashes', 'CREATE INDEX entries_by_hash ON entries (content_hash)'),
    """
    CREATE TABLE conversations (
        conv_key {serial},
        conversation_id TEXT NOT NULL {conversation_id_unique},
        tenant_id {big} NOT NULL REFERENCES tenants (tenant_id),
        scope TEXT,
        head_key {big} REFERENCES entries (entry_key),
        revision TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        updated_order {big} NOT NULL,
        usage TEXT NOT NULL,
        deferred_tool_requests TEXT,
        forked_from TEXT,
        forked_at TEXT,
        format_version INTEGER NOT NULL,
        created_seq {big} NOT NULL,
        document_count {big} NOT NULL DEFAULT 0,
        total_length {big} NOT NULL DEFAULT 0
    )
    """,
    'CREATE INDEX conversations_by_update ON conversations (updated_order DESC, conv_key)',
    'CREATE INDEX conversations_by_tenant ON conversations (tenant_id, updated_order DESC, conv_key)',
    'CREATE INDEX conversations_by_head ON conversations (head_key)',
    """
    CREATE TABLE conversation_branches (
        conv_key {big} NOT NULL REFERENCES conversations (conv_key),
        ordinal INTEGER NOT NULL,
        entry_key {big} NOT NULL REFERENCES entries (entry_key),
        PRIMARY KEY (conv_key, ordinal)
    ){clustered}
    """,
    'CREATE INDEX conversation_branches_by_entry ON conversation_branches (entry_key)',
    _documents_table(per_role=False),
    'CREATE TABLE terms (term_id {rowid}, term TEXT NOT NULL UNIQUE)',
    """
    CREATE TABLE postings (
        tenant_id {big} NOT NULL,
        term_id {big} NOT NULL,
        doc_id {big} NOT NULL,
        term_frequency INTEGER NOT NULL,
        length INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, term_id, doc_id){postings_include}
    ){clustered}
    """,
    """
    CREATE TABLE conversation_documents (
        conv_key {big} NOT NULL REFERENCES conversations (conv_key),
        doc_id {big} NOT NULL,
        entry_key {big} NOT NULL,
        run_key {big},
        position INTEGER NOT NULL,
        PRIMARY KEY (conv_key, doc_id)
    ){clustered}
    """,
    'CREATE INDEX conversation_documents_by_run ON conversation_documents (run_key, conv_key)',
    'CREATE INDEX conversation_documents_by_doc ON conversation_documents (doc_id)',
    """
    CREATE TABLE applied_writes (
        conv_key {big} NOT NULL REFERENCES conversations (conv_key),
        idempotency_key TEXT NOT NULL,
        head_key {big},
        length INTEGER NOT NULL,
        stored INTEGER NOT NULL,
        PRIMARY KEY (conv_key, idempotency_key)
    ){clustered}
    """,
)

_V2: tuple[_Statement, ...] = (
    # Postings of one term in impact order: a term's best documents are those with the highest term
    # frequency and, within it, the shortest length (see `_recall`).
    'CREATE INDEX postings_by_impact ON postings (tenant_id, term_id, term_frequency, length, doc_id)',
)

_V3: tuple[_Statement, ...] = (
    """
    CREATE TABLE message_bodies (
        scope_key TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        body {blob} NOT NULL,
        PRIMARY KEY (scope_key, content_hash)
    ){clustered}
    """,
)

_V4: tuple[_Statement, ...] = (
    """
    CREATE TABLE term_documents (
        tenant_id {big} NOT NULL,
        term_id {big} NOT NULL,
        document_count {big} NOT NULL,
        PRIMARY KEY (tenant_id, term_id)
    ){clustered}
    """,
    'INSERT INTO term_documents (tenant_id, term_id, document_count) '
    'SELECT tenant_id, term_id, count(*) FROM postings GROUP BY tenant_id, term_id',
)

_V5: tuple[_Statement, ...] = (
    # Analyzer version 2 (Unicode normalisation, case and accent folding, CJK pairs); the rebuild fills them all.
    'CREATE TABLE index_settings (name TEXT PRIMARY KEY, value TEXT NOT NULL){clustered}',
    "ALTER TABLE documents ADD COLUMN role TEXT NOT NULL DEFAULT ''",
    'ALTER TABLE conversation_documents ADD COLUMN occurrences INTEGER NOT NULL DEFAULT 1',
    'ALTER TABLE entries ADD COLUMN unindexed {boolean} NOT NULL DEFAULT {false}',
)

_V6: tuple[_Statement, ...] = (
    # When each body was last written or read (unix seconds), so `recall bodies prune` can delete the
    # ones no retained history can still reference (see `_bodies`). The bodies already stored get the
    # migration's time. SQLite's ADD COLUMN takes only a constant default, so a second statement sets
    # it; PostgreSQL evaluates a non-volatile default once, at the migration, and keeps it in the
    # catalog, so the table is not rewritten (every write names the column).
    When('constant_column_defaults', 'ALTER TABLE message_bodies ADD COLUMN touched_at INTEGER NOT NULL DEFAULT 0'),
    When('constant_column_defaults', 'UPDATE message_bodies SET touched_at = {unix_now}'),
    When(
        'constant_column_defaults',
        'ALTER TABLE message_bodies ADD COLUMN touched_at BIGINT NOT NULL DEFAULT {unix_now}',
        unset=True,
    ),
    'CREATE INDEX message_bodies_by_touched ON message_bodies (touched_at)',
)

_V7: tuple[_Statement, ...] = (
    # Posting lists in blocks (see `postings._blocks`); the rebuild fills them from the log.
    'DROP TABLE postings',
    """
    CREATE TABLE posting_blocks (
        tenant_id {big} NOT NULL,
        term_id {big} NOT NULL,
        first_doc {big} NOT NULL,
        last_doc {big} NOT NULL,
        count INTEGER NOT NULL,
        front {blob} NOT NULL,
        postings {blob} NOT NULL,
        PRIMARY KEY (tenant_id, term_id, first_doc)
    ){clustered}
    """,
)

_V8: tuple[_Statement, ...] = (
    # A write's postings as a segment of their own (see `postings._segments`); existing blocks stay as they are.
    _pending_postings_table(segment='INTEGER'),
    'ALTER TABLE tenants ADD COLUMN pending_segments INTEGER NOT NULL DEFAULT 0',
    'ALTER TABLE tenants ADD COLUMN pending_postings {big} NOT NULL DEFAULT 0',
)

_V9: tuple[_Statement, ...] = (
    # A document per speaker of a message (`index._documents`), so unique by content and role; the rebuild fills it.
    'DROP TABLE documents',
    _documents_table(per_role=True),
)

_V10: tuple[_Statement, ...] = (
    # Members held only by entries the head no longer reaches (`index._current`); the rebuild marks them.
    'ALTER TABLE conversation_documents ADD COLUMN branch_only {boolean} NOT NULL DEFAULT {false}',
    # So a search knows in one probe whether a conversation has such members to leave out.
    'CREATE INDEX conversation_documents_branch_only ON conversation_documents (conv_key) WHERE branch_only',
)

_V11: tuple[_Statement, ...] = (
    # Writers of one tenant side by side (docs/design/store.md, "Concurrency"): a document's id is derived from
    # the entry that created it (no identity, no `refs`), and every write's postings and collection
    # statistics go to a segment of its own, keyed by its first new document, folded by the merger.
    # The rebuild fills them all.
    'DROP TABLE documents',
    _documents_table(per_role=True, refs=False),
    'DROP TABLE pending_postings',
    _pending_postings_table(segment='{big}'),
    """
    CREATE TABLE index_segments (
        tenant_id {big} NOT NULL,
        segment {big} NOT NULL,
        document_count {big} NOT NULL,
        total_length {big} NOT NULL,
        postings {big} NOT NULL,
        PRIMARY KEY (tenant_id, segment)
    ){clustered}
    """,
    'ALTER TABLE tenants DROP COLUMN pending_segments',
    'ALTER TABLE tenants DROP COLUMN pending_postings',
)

_V12: tuple[_Statement, ...] = (
    # A default search leaves out only what a later attempt of the same run's same request replaced
    # (`index._superseded`), no longer everything the head left behind: the mark says what it now means.
    'DROP INDEX conversation_documents_branch_only',
    'ALTER TABLE conversation_documents RENAME COLUMN branch_only TO superseded',
    'CREATE INDEX conversation_documents_superseded ON conversation_documents (conv_key) WHERE superseded',
    """
    CREATE TABLE superseded_entries (
        conv_key {big} NOT NULL REFERENCES conversations (conv_key),
        entry_key {big} NOT NULL REFERENCES entries (entry_key),
        PRIMARY KEY (conv_key, entry_key)
    ){clustered}
    """,
    # The supersessions a store written before this version holds, from its write keys: a response
    # written by a retried model-request activity (its key `…/{attempt}/response`, attempt 2 or later)
    # beside an earlier response of the same run after the same message, itself written by a model
    # request. The rebuild then marks what only they hold.
    """
    INSERT INTO superseded_entries (conv_key, entry_key)
    SELECT DISTINCT b.conv_key, ea.entry_key FROM applied_writes b
    JOIN entries eb ON eb.entry_key = b.head_key
    JOIN entries ea ON ea.parent_key = eb.parent_key AND ea.run_key = eb.run_key AND ea.entry_key < eb.entry_key
    WHERE b.idempotency_key LIKE '%/response' AND b.idempotency_key NOT LIKE '%/1/response'
    AND EXISTS (
        SELECT 1 FROM applied_writes a
        WHERE a.conv_key = b.conv_key AND a.head_key = ea.entry_key AND a.idempotency_key LIKE '%/response'
    )
    """,
)

_V13: tuple[_Statement, ...] = (
    # The scopes holding a body, found by its hash alone (an operator token's decode in the codec
    # server, `_bodies.BodyEngine.scopes`): the table's key leads with the scope, so without this a
    # lookup by hash reads every body. The scope in the index answers it from the index alone.
    'CREATE INDEX message_bodies_by_hash ON message_bodies (content_hash, scope_key)',
)

_V14: tuple[_Statement, ...] = (
    # A vector per document, keyed as the document is (tenant, content, role) so a rebuild keeps it, as
    # int8 components and a scale (`index._vectors`); `vector_key` orders the rows a search has in memory.
    """
    CREATE TABLE document_vectors (
        vector_key {serial},
        tenant_id {big} NOT NULL,
        content_hash {blob} NOT NULL,
        role TEXT NOT NULL,
        vector {blob} NOT NULL,
        scale REAL NOT NULL,
        UNIQUE (tenant_id, content_hash, role)
    )
    """,
    'CREATE INDEX document_vectors_by_key ON document_vectors (tenant_id, vector_key)',
    # The one embedding model (and dimension) the store's vectors come from.
    'CREATE TABLE vector_space (space INTEGER PRIMARY KEY, model TEXT NOT NULL, dimensions INTEGER NOT NULL)',
)

_V15: tuple[_Statement, ...] = (
    # `ConversationStore.update` (pydantic-ai 2.78): what a conversation is about, and the app's own
    # metadata (JSON). A save never writes them, so they outlive every save.
    'ALTER TABLE conversations ADD COLUMN title TEXT',
    'ALTER TABLE conversations ADD COLUMN metadata TEXT',
)

_V16: tuple[_Statement, ...] = (
    # An append in one call where statements are round trips (`log._one_call`): given what a read
    # without locks found, it takes the locks the general append takes, in its order, checks that the
    # read still holds, and writes the append's rows, creating the conversation when `p_conv` is NULL;
    # or, when anything changed, writes nothing and answers NULL (the caller then runs the general
    # append). Keys are drawn after the content locks, as the general append draws them, and must be
    # consecutive: the caller numbered documents and encoded postings from the first one. Returns the
    # first entry key and the conversation's, then the tenant's pending segments and postings when the
    # append added a segment. Its statements keep generic plans (`plan_cache_mode = auto`, where the
    # store's sessions force custom ones): planning each of them anew on every call cost the server
    # more than running them. A generic plan knows neither an array's length nor which tenant, so
    # every lookup of an array's elements is a scalar subquery, probed element by element by an
    # index: written as a join, the plan hashed every document of the tenant on every call.
    When(
        'appends_in_one_call',
        """
        CREATE FUNCTION temporal_recall_append(
            p_conv BIGINT, p_conversation_id TEXT, p_tenant BIGINT, p_scope TEXT, p_head BIGINT,
            p_revision TEXT, p_usage TEXT, p_idempotency_key TEXT, p_fence_key TEXT, p_fence_attempt INTEGER,
            p_terms TEXT[], p_term_ids BIGINT[], p_lock_hashes BYTEA[], p_lock_keys INTEGER[], p_contents BYTEA[],
            p_entry_ids TEXT[], p_entry_hashes BYTEA[], p_entry_runs TEXT[], p_entry_messages TEXT[],
            p_entry_unindexed BOOLEAN[], p_first_position INTEGER,
            p_doc_offsets BIGINT[], p_doc_entries INTEGER[], p_doc_lengths INTEGER[], p_doc_terms BYTEA[],
            p_doc_roles TEXT[], p_documents_per_entry BIGINT,
            p_posting_terms BIGINT[], p_posting_firsts BIGINT[], p_posting_lasts BIGINT[], p_posting_blocks BYTEA[],
            p_postings BIGINT, p_usage_after TEXT, p_revision_after TEXT, p_updated_at TEXT, p_updated_order BIGINT
        ) RETURNS BIGINT[] LANGUAGE plpgsql SET plan_cache_mode = 'auto' AS $append$
        DECLARE
            conversation RECORD;
            conv BIGINT := p_conv;
            created_seq BIGINT;
            entry_count INTEGER := cardinality(p_entry_ids);
            document_total INTEGER := cardinality(p_doc_offsets);
            document_length BIGINT := coalesce((SELECT sum(x.l) FROM unnest(p_doc_lengths) AS x(l)), 0);
            keys BIGINT[];
            run_keys BIGINT[];
            base BIGINT;
            doc_base BIGINT;
            segment BIGINT;
            pending BIGINT[];
        BEGIN
            IF conv IS NOT NULL THEN
                SELECT c.tenant_id, c.scope, c.head_key, c.revision, c.usage INTO conversation
                FROM conversations c WHERE c.conv_key = conv FOR UPDATE;
                IF NOT FOUND OR conversation.tenant_id <> p_tenant OR conversation.scope IS DISTINCT FROM p_scope
                    OR conversation.head_key IS DISTINCT FROM p_head OR conversation.revision <> p_revision
                    OR conversation.usage <> p_usage THEN
                    RETURN NULL;
                END IF;
            END IF;
            PERFORM pg_advisory_xact_lock_shared(
                hashtext(current_schema() || '/temporal_recall/tenants'), CAST(p_tenant % 2147483647 AS INT));
            IF EXISTS (SELECT 1 FROM conversation_branches b WHERE b.conv_key = conv)
                OR EXISTS (
                    SELECT 1 FROM applied_writes w WHERE w.conv_key = conv AND w.idempotency_key = p_idempotency_key)
                OR EXISTS (
                    SELECT 1 FROM applied_writes f
                    WHERE f.conv_key = conv AND f.idempotency_key = p_fence_key AND f.length > p_fence_attempt)
                OR (SELECT count(*) FROM unnest(p_terms, p_term_ids) AS x(term, k)
                    WHERE (SELECT t.term FROM terms t WHERE t.term_id = x.k) = x.term)
                    <> cardinality(p_terms) THEN
                RETURN NULL;
            END IF;
            -- The content locks, in the arrays' order (sorted by key by the caller), then the keys.
            PERFORM pg_advisory_xact_lock(hashtext(current_schema() || '/temporal_recall/contents'), x.k)
            FROM unnest(p_lock_hashes, p_lock_keys) AS x(h, k)
            WHERE (SELECT 1 FROM documents d WHERE d.tenant_id = p_tenant AND d.content_hash = x.h LIMIT 1) IS NULL;
            IF EXISTS (
                SELECT 1 FROM unnest(p_contents) AS x(h)
                WHERE (
                    SELECT 1 FROM documents d WHERE d.tenant_id = p_tenant AND d.content_hash = x.h LIMIT 1) = 1) THEN
                RETURN NULL;
            END IF;
            IF conv IS NULL THEN
                created_seq := (SELECT coalesce(max(e.entry_key), 0) FROM entries e);
            END IF;
            -- The runs, interned after the content locks and before the keys, as the general append does.
            INSERT INTO runs (run_id)
            SELECT n.run_id FROM (
                SELECT DISTINCT x.run_id FROM unnest(p_entry_runs) AS x(run_id)
                WHERE x.run_id IS NOT NULL AND (SELECT r.run_key FROM runs r WHERE r.run_id = x.run_id) IS NULL
            ) AS n ORDER BY n.run_id COLLATE "C"
            ON CONFLICT (run_id) DO NOTHING;
            run_keys := ARRAY(
                SELECT (SELECT r.run_key FROM runs r WHERE r.run_id = x.run_id)
                FROM unnest(p_entry_runs) WITH ORDINALITY AS x(run_id, i) ORDER BY x.i);
            keys := ARRAY(
                SELECT nextval(pg_get_serial_sequence('entries', 'entry_key')) FROM generate_series(1, entry_count));
            base := keys[1];
            IF keys[entry_count] - base <> entry_count - 1 THEN
                RETURN NULL;
            END IF;
            IF conv IS NULL THEN
                INSERT INTO conversations (
                    conversation_id, tenant_id, head_key, created_seq, scope, revision, updated_at, updated_order,
                    usage, deferred_tool_requests, forked_from, forked_at, format_version)
                VALUES (
                    p_conversation_id, p_tenant, NULL, created_seq, p_scope, p_revision_after, p_updated_at,
                    p_updated_order, p_usage_after, NULL, NULL, NULL, 1)
                ON CONFLICT (conversation_id) DO NOTHING
                RETURNING conv_key INTO conv;
                IF conv IS NULL THEN
                    RETURN NULL;
                END IF;
            END IF;
            doc_base := base * p_documents_per_entry;
            INSERT INTO entries (
                entry_key, entry_id, parent_key, position, kind, content_hash, run_key, message, unindexed)
            SELECT base + x.i - 1, x.id, CASE WHEN x.i = 1 THEN p_head ELSE base + x.i - 2 END,
                p_first_position + CAST(x.i AS INTEGER) - 1, 'message', x.h, x.r, x.m, x.u
            FROM unnest(p_entry_ids, p_entry_hashes, run_keys, p_entry_messages, p_entry_unindexed)
                WITH ORDINALITY AS x(id, h, r, m, u, i);
            IF document_total > 0 THEN
                INSERT INTO documents (doc_id, tenant_id, content_hash, length, term_ids, role)
                SELECT doc_base + x.o, p_tenant, p_entry_hashes[x.e + 1], x.l, x.t, x.r
                FROM unnest(p_doc_offsets, p_doc_entries, p_doc_lengths, p_doc_terms, p_doc_roles) AS x(o, e, l, t, r);
                INSERT INTO conversation_documents (conv_key, doc_id, entry_key, run_key, position, occurrences)
                SELECT conv, doc_base + x.o, base + x.e, run_keys[x.e + 1], p_first_position + x.e, 1
                FROM unnest(p_doc_offsets, p_doc_entries) AS x(o, e);
                segment := doc_base + p_doc_offsets[1];
                INSERT INTO pending_postings (tenant_id, segment, term_id, first_doc, last_doc, postings)
                SELECT p_tenant, segment, x.t, doc_base + x.f, doc_base + x.l, x.b
                FROM unnest(p_posting_terms, p_posting_firsts, p_posting_lasts, p_posting_blocks) AS x(t, f, l, b)
                ORDER BY x.t, x.f;
                INSERT INTO index_segments (tenant_id, segment, document_count, total_length, postings)
                VALUES (p_tenant, segment, document_total, document_length, p_postings);
                pending := ARRAY(
                    SELECT count(*) FROM index_segments s WHERE s.tenant_id = p_tenant
                    UNION ALL
                    SELECT CAST(sum(s.postings) AS BIGINT) FROM index_segments s WHERE s.tenant_id = p_tenant);
            END IF;
            INSERT INTO applied_writes (conv_key, idempotency_key, head_key, length, stored)
            VALUES (conv, p_idempotency_key, base + entry_count - 1, p_first_position + entry_count, entry_count);
            IF p_fence_key IS NOT NULL THEN
                INSERT INTO applied_writes (conv_key, idempotency_key, head_key, length, stored)
                VALUES (conv, p_fence_key, NULL, p_fence_attempt, 0)
                ON CONFLICT (conv_key, idempotency_key)
                DO UPDATE SET length = GREATEST(applied_writes.length, excluded.length);
            END IF;
            UPDATE conversations SET head_key = base + entry_count - 1, usage = p_usage_after,
                revision = p_revision_after, updated_at = p_updated_at, updated_order = p_updated_order,
                document_count = document_count + document_total, total_length = total_length + document_length
            WHERE conv_key = conv;
            RETURN ARRAY[base, conv] || pending;
        END
        $append$
        """,
    ),
    # What `log._one_call` computes an append's rows from, read without locks (the call above checks it
    # again): the conversation (or, when there is none, its scope's tenant), whether the general append
    # must apply the write (kept branches, the key applied, a higher fence attempt, a document of one of
    # the contents), and the ids of the words the store has. A function for its generic plans, as above.
    When(
        'appends_in_one_call',
        """
        CREATE FUNCTION temporal_recall_append_state(
            p_conversation_id TEXT, p_idempotency_key TEXT, p_fence_key TEXT, p_fence_attempt INTEGER,
            p_contents BYTEA[], p_words TEXT[], p_scope_key TEXT,
            OUT o_conv BIGINT, OUT o_tenant BIGINT, OUT o_scope TEXT, OUT o_head BIGINT, OUT o_position INTEGER,
            OUT o_head_hash BYTEA, OUT o_revision TEXT, OUT o_usage TEXT, OUT o_general BOOLEAN,
            OUT o_words TEXT[], OUT o_term_ids BIGINT[]
        ) LANGUAGE plpgsql STABLE SET plan_cache_mode = 'auto' AS $state$
        BEGIN
            SELECT c.conv_key, c.tenant_id, c.scope, c.head_key, coalesce(h.position, -1), h.content_hash,
                c.revision, c.usage
            INTO o_conv, o_tenant, o_scope, o_head, o_position, o_head_hash, o_revision, o_usage
            FROM conversations c LEFT JOIN entries h ON h.entry_key = c.head_key
            WHERE c.conversation_id = p_conversation_id;
            IF NOT FOUND THEN
                o_position := -1;
                o_tenant := (SELECT t.tenant_id FROM tenants t WHERE t.scope_key = p_scope_key);
            END IF;
            o_general := EXISTS (SELECT 1 FROM conversation_branches b WHERE b.conv_key = o_conv)
                OR EXISTS (
                    SELECT 1 FROM applied_writes w WHERE w.conv_key = o_conv AND w.idempotency_key = p_idempotency_key)
                OR EXISTS (
                    SELECT 1 FROM applied_writes f
                    WHERE f.conv_key = o_conv AND f.idempotency_key = p_fence_key AND f.length > p_fence_attempt)
                OR EXISTS (
                    SELECT 1 FROM unnest(p_contents) AS x(h)
                    WHERE (
                        SELECT 1 FROM documents d WHERE d.tenant_id = o_tenant AND d.content_hash = x.h LIMIT 1) = 1);
            SELECT coalesce(array_agg(found.w), ARRAY[]::TEXT[]), coalesce(array_agg(found.k), ARRAY[]::BIGINT[])
            INTO o_words, o_term_ids
            FROM (
                SELECT x.w, (SELECT t.term_id FROM terms t WHERE t.term = x.w) AS k FROM unnest(p_words) AS x(w)
            ) AS found
            WHERE found.k IS NOT NULL;
        END
        $state$
        """,
    ),
)

_V17: tuple[_Statement, ...] = (
    # How many vectors each tenant holds, in a few rows per tenant (`index._vectors`): a search by
    # meaning checks that the sign codes it holds are current by this sum and the highest key, instead
    # of counting the tenant's vectors on every search. Writers of one tenant add to the row of a shard
    # drawn from what they write, so they seldom wait for each other. Counted again from the vectors
    # whenever it is applied, so applying it twice is harmless.
    """
    CREATE TABLE IF NOT EXISTS vector_counts (
        tenant_id {big} NOT NULL,
        shard INTEGER NOT NULL,
        vectors {big} NOT NULL,
        PRIMARY KEY (tenant_id, shard)
    ){clustered}
    """,
    'DELETE FROM vector_counts',
    'INSERT INTO vector_counts (tenant_id, shard, vectors) '
    'SELECT tenant_id, 0, count(*) FROM document_vectors GROUP BY tenant_id',
)

_V18: tuple[_Statement, ...] = (
    # The top tier of each long posting list (`postings._tiers`): its postings of highest weight, in
    # blocks laid out as `posting_blocks`' (without `front`), and per term the weight cut that chose
    # them and the best (frequency, length) pairs left below it. Filled as writes reach long lists
    # and by `recall reindex`; a term without a tier is searched whole, so the tables start empty.
    """
    CREATE TABLE IF NOT EXISTS posting_tiers (
        tenant_id {big} NOT NULL,
        term_id {big} NOT NULL,
        first_doc {big} NOT NULL,
        last_doc {big} NOT NULL,
        count INTEGER NOT NULL,
        postings {blob} NOT NULL,
        PRIMARY KEY (tenant_id, term_id, first_doc)
    ){clustered}
    """,
    """
    CREATE TABLE IF NOT EXISTS term_tiers (
        tenant_id {big} NOT NULL,
        term_id {big} NOT NULL,
        cut DOUBLE PRECISION NOT NULL,
        reference_length DOUBLE PRECISION NOT NULL,
        tier_postings {big} NOT NULL,
        cut_postings {big} NOT NULL,
        frontier {blob} NOT NULL,
        PRIMARY KEY (tenant_id, term_id)
    ){clustered}
    """,
)

_V19: tuple[_Statement, ...] = (
    # A deeper tier for each very long posting list (`postings._tiers.DEEP`), laid out as the top tier's
    # tables: where four common words leave a page in doubt after the top tiers, a search reads down to
    # it instead of every posting. Filled as writes reach very long lists and by `recall reindex`; a
    # term without one is read whole when its top tier is not enough, so the tables start empty.
    """
    CREATE TABLE IF NOT EXISTS posting_deep_tiers (
        tenant_id {big} NOT NULL,
        term_id {big} NOT NULL,
        first_doc {big} NOT NULL,
        last_doc {big} NOT NULL,
        count INTEGER NOT NULL,
        postings {blob} NOT NULL,
        PRIMARY KEY (tenant_id, term_id, first_doc)
    ){clustered}
    """,
    """
    CREATE TABLE IF NOT EXISTS term_deep_tiers (
        tenant_id {big} NOT NULL,
        term_id {big} NOT NULL,
        cut DOUBLE PRECISION NOT NULL,
        reference_length DOUBLE PRECISION NOT NULL,
        tier_postings {big} NOT NULL,
        cut_postings {big} NOT NULL,
        frontier {blob} NOT NULL,
        PRIMARY KEY (tenant_id, term_id)
    ){clustered}
    """,
)

_V20: tuple[_Statement, ...] = (
    # A version per tier, changed by every write that changes the tier's postings (`postings._tiers`): a
    # search process keeps the tiers it decoded (`index._tier_cache`) and reads one again only when its
    # version moved. The tiers written before this migration share version 0 until their next write.
    'ALTER TABLE term_tiers ADD COLUMN version {big} NOT NULL DEFAULT 0',
    'ALTER TABLE term_deep_tiers ADD COLUMN version {big} NOT NULL DEFAULT 0',
)

_VERSIONS: tuple[tuple[_Statement, ...], ...] = (
    _V1,
    _V2,
    _V3,
    _V4,
    _V5,
    _V6,
    _V7,
    _V8,
    _V9,
    _V10,
    _V11,
    _V12,
    _V13,
    _V14,
    _V15,
    _V16,
    _V17,
    _V18,
    _V19,
    _V20,
)
"""Each released migration's statements, in `sql._migrations.RELEASED` order. Append; never edit a released one."""


def _rendered(statements: Sequence[_Statement], dialect: Dialect) -> tuple[str, ...]:
    kept = [
        s if isinstance(s, str) else s.statement
        for s in statements
        if isinstance(s, str) or getattr(dialect, s.flag) != s.unset
    ]
    return tuple(statement.format_map(dialect.ddl) for statement in kept)


def render(dialect: Dialect) -> tuple[Migration, ...]:
    """Every released migration, in version order, in the spelling of one backend."""
    return released(*(_rendered(statements, dialect) for statements in _VERSIONS))
