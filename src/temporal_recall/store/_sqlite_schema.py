"""The SQLite schema, as numbered migrations recorded in `schema_migrations`.

Opening a store reads the recorded version before writing anything: a database written by a newer
temporal-recall is refused (`SchemaTooNew`) untouched, a SQLite file that has tables but no
`schema_migrations` is refused as someone else's (`NotADatabase`), and an older one gets the
missing migrations applied in one `BEGIN IMMEDIATE` transaction, so a crash mid-upgrade leaves the
old version intact.

Schema notes (version 1):

- `entries`: the message log. `entry_key` is an AUTOINCREMENT surrogate, so keys grow with
  insertion order and are never reused; the index rebuild replays writes in that order. `position`
  is the number of ancestors (history length = head position + 1). `content_hash` is the 32-byte
  SHA-256 of `temporal_recall.content.canonical_json`, used only for matching. `message` is the
  exact JSON pydantic-ai's adapter produced.
- `conversations`: one row per `ConversationRecord`. `head_key` and `conversation_branches`
  reference entries by key with foreign keys, so an entry a record still reaches can never be
  deleted. `created_seq` is the largest entry key when the conversation was (re)created, which
  orders the index rebuild. `document_count`/`total_length` keep per-conversation BM25 stats O(1).
- `tenants`: one per distinct scope (`'n:'` for no scope, `'s:' + scope` otherwise), with the
  tenant-wide BM25 counters.
- `documents`: one per distinct message content per tenant; `doc_id` order is first-indexed order
  (the ranking tie-break). `refs` counts memberships, `term_ids` lists the terms (delta varints),
  so a document and its postings are deleted by key when its last conversation goes.
- `terms`, `postings`: the interned vocabulary and the inverted index, `length` denormalised so a
  tenant-wide search reads one index range per term.
- `conversation_documents`: membership, the first entry at which each document appeared in a
  conversation (any branch).
- `applied_writes`: idempotency keys of `append`, with the result recorded the first time; also each
  write fence (key `fence:…`, the highest attempt seen in `length`, no head), see `_protocol.Fence`.

Version 5 (analyzer version 2): `index_settings` records which analyzer built the index
(`analyzer` = `search.ANALYZER.key`); `documents.role` is who spoke the content (`message_role`),
for role filters; `conversation_documents.occurrences` counts the conversation's indexed entries
holding the document, so a search knows which documents to expand into several hits
(`_occurrences`); `entries.unindexed` marks a message an application's own summary rule kept out of
the index. The migration rebuilds the index (`Migration.reindex`), logging its progress.

Version 6: `message_bodies.touched_at`, when a body was last written or read (unix seconds, touched
at most once per `_protocol.BODY_TOUCH_INTERVAL`), indexed for `prune_bodies`.
"""

from __future__ import annotations

from ._migrations import MIGRATIONS_TABLE, Migration, latest_version, pending, reindex_progress, released

__all__ = ('MIGRATIONS', 'MIGRATIONS_TABLE', 'Migration', 'latest_version', 'pending', 'reindex_progress')


_V1 = (
    """
    CREATE TABLE tenants (
        tenant_id INTEGER PRIMARY KEY,
        scope_key TEXT NOT NULL UNIQUE,
        document_count INTEGER NOT NULL DEFAULT 0,
        total_length INTEGER NOT NULL DEFAULT 0
    )
    """,
    'CREATE TABLE runs (run_key INTEGER PRIMARY KEY, run_id TEXT NOT NULL UNIQUE)',
    """
    CREATE TABLE entries (
        entry_key INTEGER PRIMARY KEY AUTOINCREMENT,
        entry_id TEXT NOT NULL UNIQUE,
        parent_key INTEGER REFERENCES entries (entry_key),
        position INTEGER NOT NULL,
        kind TEXT NOT NULL,
        content_hash BLOB NOT NULL,
        run_key INTEGER REFERENCES runs (run_key),
        message TEXT NOT NULL
    )
    """,
    'CREATE INDEX entries_by_parent ON entries (parent_key)',
    'CREATE INDEX entries_by_hash ON entries (content_hash)',
    """
    CREATE TABLE conversations (
        conv_key INTEGER PRIMARY KEY AUTOINCREMENT,
        conversation_id TEXT NOT NULL UNIQUE,
        tenant_id INTEGER NOT NULL REFERENCES tenants (tenant_id),
        scope TEXT,
        head_key INTEGER REFERENCES entries (entry_key),
        revision TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        updated_order INTEGER NOT NULL,
        usage TEXT NOT NULL,
        deferred_tool_requests TEXT,
        forked_from TEXT,
        forked_at TEXT,
        format_version INTEGER NOT NULL,
        created_seq INTEGER NOT NULL,
        document_count INTEGER NOT NULL DEFAULT 0,
        total_length INTEGER NOT NULL DEFAULT 0
    )
    """,
    'CREATE INDEX conversations_by_update ON conversations (updated_order DESC, conv_key)',
    'CREATE INDEX conversations_by_tenant ON conversations (tenant_id, updated_order DESC, conv_key)',
    'CREATE INDEX conversations_by_head ON conversations (head_key)',
    """
    CREATE TABLE conversation_branches (
        conv_key INTEGER NOT NULL REFERENCES conversations (conv_key),
        ordinal INTEGER NOT NULL,
        entry_key INTEGER NOT NULL REFERENCES entries (entry_key),
        PRIMARY KEY (conv_key, ordinal)
    ) WITHOUT ROWID
    """,
    'CREATE INDEX conversation_branches_by_entry ON conversation_branches (entry_key)',
    """
    CREATE TABLE documents (
        doc_id INTEGER PRIMARY KEY AUTOINCREMENT,
        tenant_id INTEGER NOT NULL REFERENCES tenants (tenant_id),
        content_hash BLOB NOT NULL,
        length INTEGER NOT NULL,
        refs INTEGER NOT NULL,
        term_ids BLOB NOT NULL,
        UNIQUE (tenant_id, content_hash)
    )
    """,
    'CREATE TABLE terms (term_id INTEGER PRIMARY KEY, term TEXT NOT NULL UNIQUE)',
    """
    CREATE TABLE postings (
        tenant_id INTEGER NOT NULL,
        term_id INTEGER NOT NULL,
        doc_id INTEGER NOT NULL,
        term_frequency INTEGER NOT NULL,
        length INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, term_id, doc_id)
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE conversation_documents (
        conv_key INTEGER NOT NULL REFERENCES conversations (conv_key),
        doc_id INTEGER NOT NULL,
        entry_key INTEGER NOT NULL,
        run_key INTEGER,
        position INTEGER NOT NULL,
        PRIMARY KEY (conv_key, doc_id)
    ) WITHOUT ROWID
    """,
    'CREATE INDEX conversation_documents_by_run ON conversation_documents (run_key, conv_key)',
    'CREATE INDEX conversation_documents_by_doc ON conversation_documents (doc_id)',
    """
    CREATE TABLE applied_writes (
        conv_key INTEGER NOT NULL REFERENCES conversations (conv_key),
        idempotency_key TEXT NOT NULL,
        head_key INTEGER,
        length INTEGER NOT NULL,
        stored INTEGER NOT NULL,
        PRIMARY KEY (conv_key, idempotency_key)
    ) WITHOUT ROWID
    """,
)

_V2 = (
    # Postings of one term in impact order: a term's best documents are those with the highest term
    # frequency and, within it, the shortest length. A scope-wide search reads only the head of each
    # frequency group for a common term instead of its whole posting list (see `_recall`).
    'CREATE INDEX postings_by_impact ON postings (tenant_id, term_id, term_frequency, length, doc_id)',
)

_V3 = (
    # Message bodies for RecallDataCodec, addressed by the SHA-256 of their bytes, per tenant scope.
    # Independent of conversations on purpose: replaying a history needs them even after the
    # conversation that produced them was deleted.
    """CREATE TABLE message_bodies (
        scope_key TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        body BLOB NOT NULL,
        PRIMARY KEY (scope_key, content_hash)
    ) WITHOUT ROWID""",
)

_V4 = (
    # Each term's document frequency per tenant, kept with the postings in the same transactions, so
    # a scope-wide search reads a common term's frequency in one row instead of counting its postings.
    """CREATE TABLE term_documents (
        tenant_id INTEGER NOT NULL,
        term_id INTEGER NOT NULL,
        document_count INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, term_id)
    ) WITHOUT ROWID""",
    'INSERT INTO term_documents (tenant_id, term_id, document_count) '
    'SELECT tenant_id, term_id, count(*) FROM postings GROUP BY tenant_id, term_id',
)

_V5 = (
    # Analyzer version 2 (Unicode normalisation, case and accent folding, CJK pairs), recorded in
    # `index_settings`; who spoke each document, for role filters; how many entries of a conversation
    # hold a document, so a search expands the repeated ones into their occurrences; and the entries an
    # application's own summary rule kept out of the index. The rebuild fills them all.
    'CREATE TABLE index_settings (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID',
    "ALTER TABLE documents ADD COLUMN role TEXT NOT NULL DEFAULT ''",
    'ALTER TABLE conversation_documents ADD COLUMN occurrences INTEGER NOT NULL DEFAULT 1',
    'ALTER TABLE entries ADD COLUMN unindexed INTEGER NOT NULL DEFAULT 0',
)

_V6 = (
    # When each body was last written or read (unix seconds), so `recall bodies prune` can delete the
    # ones no retained history can still reference (see `_bodies`). SQLite's ADD COLUMN takes only a
    # constant default: the bodies already stored get the migration's time in a second statement.
    'ALTER TABLE message_bodies ADD COLUMN touched_at INTEGER NOT NULL DEFAULT 0',
    "UPDATE message_bodies SET touched_at = CAST(strftime('%s', 'now') AS INTEGER)",
    'CREATE INDEX message_bodies_by_touched ON message_bodies (touched_at)',
)

MIGRATIONS: tuple[Migration, ...] = released(_V1, _V2, _V3, _V4, _V5, _V6)
"""Every migration, in version order, as SQLite statements. Append to it; never edit a released one."""
