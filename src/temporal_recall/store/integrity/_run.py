"""`run_check`: every check, in order, in one read snapshot the caller opened."""

from __future__ import annotations

from collections.abc import Callable

from ..sql._session import Session
from ._index import check_index
from ._log import check_bodies, check_conversations, check_entries
from ._report import CHECK_STEPS, CheckReport
from ._tiers import check_tiers

__all__ = ('run_check',)


async def run_check(session: Session, progress: Callable[[str], None] | None = None) -> CheckReport:
    """Check every rule in the module notes; the report lists each violation found."""
    report = CheckReport()

    def say(step: str) -> None:
        if progress is not None:
            progress(step)

    entries, conversations, index, bodies = CHECK_STEPS
    say(entries)
    await check_entries(session, report)
    say(conversations)
    await check_conversations(session, report)
    say(index)
    await check_index(session, report)
    await check_tiers(session, report)
    say(bodies)
    await check_bodies(session, report)
    return report
