"""How the key columns several tables share are spelt: a scope's tenant key, a content hash, a run's id."""

from __future__ import annotations

__all__ = ('hash_bytes', 'run_id_of', 'scope_key', 'scope_of_key')


def scope_key(scope: str | None) -> str:
    """The tenant key of a scope: `'n:'` for no scope and `'s:' + scope` otherwise.

    Keeping `None` and `''` apart matters: a search with scope `''` must never see conversations
    stored without a scope.
    """
    return 'n:' if scope is None else 's:' + scope


def scope_of_key(key: str) -> str | None:
    """The scope a tenant key stands for: `scope_key`'s inverse."""
    return None if key == 'n:' else key.removeprefix('s:')


def hash_bytes(hex_digest: str) -> bytes:
    """A content hash as the 32 raw bytes stored in hash columns (half the size of the hex text)."""
    return bytes.fromhex(hex_digest)


def run_id_of(run_key: str) -> str:
    """The run id of the row's `run_key` column, as a scalar subquery: a key lookup per row. As a
    `LEFT JOIN`, PostgreSQL hashed the whole `runs` table for a page of ten rows, a cost growing with
    the runs."""
    return f'(SELECT r.run_id FROM runs r WHERE r.run_key = {run_key})'  # noqa: S608 (a column name)
