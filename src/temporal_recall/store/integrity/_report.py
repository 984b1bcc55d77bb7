"""What `recall check` reports: findings, and the steps it goes through."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ('CHECK_STEPS', 'CheckReport', 'Finding', 'FindingKind', 'stored_bytes')

FindingKind = Literal['chain', 'content_hash', 'scope', 'index', 'body', 'history']
"""What a finding is about (see the module notes)."""

CHECK_STEPS = ('checking entries and chains', 'checking conversations', 'checking the index', 'checking message bodies')
"""What `run_check` reports to its `progress` callback, in order."""


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


def stored_bytes(value: Any) -> bytes:
    """A binary column's value; a damaged row may hold text there instead (SQLite keeps whatever was written)."""
    return value.encode() if isinstance(value, str) else bytes(value)
