"""The SQLite schema: the engine's tables (`_schema`) in SQLite's spelling, as numbered migrations.

Opening a store reads the recorded version before writing anything (see `_sqlite_migrate`): a
database written by a newer temporal-recall is refused (`SchemaTooNew`) untouched, a SQLite file that
has tables but no `schema_migrations` is refused as someone else's (`NotADatabase`), and an older one
gets the missing migrations applied in one `BEGIN IMMEDIATE` transaction, so a crash mid-upgrade
leaves the old version intact.

SQLite's spelling: `AUTOINCREMENT` keys for the log, conversations and documents (never reused, so
keys keep insertion order), plain rowid keys for the interned tables; `WITHOUT ROWID` for the tables
read by primary key range (membership, postings, branches), which stores them in that order, so
`postings` needs no covering index; SQLite's dynamic `INTEGER` and `BLOB`.
"""

from __future__ import annotations

from ._migrations import MIGRATIONS_TABLE, Migration, latest_version, pending, reindex_progress
from ._schema import Spelling, render

__all__ = ('MIGRATIONS', 'MIGRATIONS_TABLE', 'Migration', 'latest_version', 'pending', 'reindex_progress')

SPELLING = Spelling(
    backend='sqlite',
    serial='INTEGER PRIMARY KEY AUTOINCREMENT',
    rowid='INTEGER PRIMARY KEY',
    big='INTEGER',
    bytes='BLOB',
    bool='INTEGER',
    false='0',
    clustered=' WITHOUT ROWID',
    postings_include='',
    conversation_id_unique='UNIQUE',
)

MIGRATIONS: tuple[Migration, ...] = render(SPELLING)
"""Every migration, in version order, as SQLite statements (versions and names: `_migrations.RELEASED`)."""
