"""Schema migrations bookkeeping, written once for every backend: versions, names, what is pending, applying.
More in docs/design/store.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = (
    'MIGRATIONS_TABLE',
    'RELEASED',
    'Migration',
    'latest_version',
    'pending',
    'reindex_progress',
    'released',
)

_log = logging.getLogger('temporal_recall.store')

RELEASED: tuple[tuple[int, str, bool], ...] = (
    (1, 'conversation log and search index', False),
    (2, 'postings in impact order', False),
    (3, 'message bodies for the payload codec', False),
    (4, 'document frequency per term', False),
    (5, 'analyzer unicode-cjk-bigram/2, document roles, occurrences', True),
    (6, 'message bodies record when they were last used', False),
    (7, 'postings in blocks', True),
    (8, 'postings written as segments, merged into blocks', False),
    (9, 'a document per speaker of a message', True),
    (10, 'search sees the current history; branch-only members are marked', True),
    (11, 'writers of one tenant side by side: documents numbered by entry, statistics in segments', True),
    (12, 'search sees every branch; only what a retried request replaced is marked superseded', True),
    (13, 'message bodies found by hash in any scope', False),
    (14, 'document vectors for recall by meaning', False),
    (15, 'conversation titles and metadata', False),
    (16, 'an append in one call where statements are round trips', False),
    (17, 'vector counts per tenant', False),
    (18, 'a top tier for each long posting list', False),
    (19, 'a deeper tier for each very long posting list', False),
    (20, 'a version per tier: search processes keep the tiers they read', False),
)
"""`(version, name, reindex)` of every released migration. Append to it; never edit a released one."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: Sequence[str]
    reindex: bool = False
    """Rebuild the search index after the pending migrations' statements, in the same transaction: for
    a migration that changes what the index holds, how it is laid out or how text is analysed (the
    rebuild records `text.ANALYZER`)."""


def released(*statements: Sequence[str]) -> tuple[Migration, ...]:
    """The released migrations, given one backend's statements for each, in version order."""
    return tuple(
        Migration(version, name, body, reindex=reindex)
        for (version, name, reindex), body in zip(RELEASED, statements, strict=True)
    )


def latest_version(migrations: Sequence[Migration] | None = None) -> int:
    """The highest version among `migrations`; by default the latest released one (the same on every backend)."""
    if migrations is None:
        return max(version for version, _, _ in RELEASED)
    return max((migration.version for migration in migrations), default=0)


MIGRATIONS_TABLE = (
    'CREATE TABLE IF NOT EXISTS schema_migrations '
    '(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)'
)
"""Where each backend records the migrations it applied: the same table, and the same statement, everywhere."""


def pending(migrations: Sequence[Migration], recorded: int) -> list[Migration]:
    """The migrations a store at version `recorded` still needs, in the order to apply them."""
    return sorted((m for m in migrations if m.version > recorded), key=lambda migration: migration.version)


def reindex_progress(store: str, migrations: Sequence[Migration]) -> Callable[[int, int], None]:
    """Logs the index rebuild of `migrations` (one rebuild for them all; logger `temporal_recall.store`,
    INFO) at its start, at every tenth of the way and at its end, so an operator watching a long
    upgrade sees it move."""
    reported = -1
    names = ' and '.join(f'{migration.version} ({migration.name})' for migration in migrations)
    which = f'migration{"s" if len(migrations) > 1 else ""} {names}'

    def report(done: int, total: int) -> None:
        nonlocal reported
        tenth = 10 if total == 0 else done * 10 // total
        if tenth == reported and done != 0:
            return
        reported = tenth
        _log.info('Store %s, %s: reindexing, %d of %d entries done.', store, which, done, total)

    return report
