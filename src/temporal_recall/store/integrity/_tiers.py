"""The tiers' checks (`postings._tiers`), at every level: each tier holds exactly its list's postings that
reach its cut, and its frontier bounds every other posting of the list. A pruned search trusts both to rank exactly."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..postings._blocks import BLOCKS, NO_POSTINGS, read_blocks
from ..postings._tiers import LEVELS, Level, TierState, frontier_of, reference_weights, tier_states
from ..protocol import PostingColumns
from ..sql._session import Session
from ._report import CheckReport

__all__ = ('check_tiers',)


async def check_tiers(session: Session, report: CheckReport) -> None:
    """Every level's tiers (`postings._tiers.LEVELS`), one term at a time, so the check holds one list in
    memory whatever the tenant's size, and reads it once for all its levels."""
    tiered: dict[int, dict[int, list[Level]]] = {}
    for level in LEVELS:
        states_table, postings_table = level.states, level.postings  # Both checked when the level was made.
        for tenant_id, term_id in await session.rows(f'SELECT tenant_id, term_id FROM {states_table}'):  # noqa: S608
            tiered.setdefault(int(tenant_id), {}).setdefault(int(term_id), []).append(level)
        for tenant_id, term_id in await session.rows(
            f'SELECT DISTINCT p.tenant_id, p.term_id FROM {postings_table} p WHERE NOT EXISTS '  # noqa: S608
            f'(SELECT 1 FROM {states_table} t WHERE t.tenant_id = p.tenant_id AND t.term_id = p.term_id) '
            'ORDER BY 1, 2'
        ):
            report.add('index', f'{_name(level)} (tenant {tenant_id}, term {term_id})', 'holds postings but has no cut')
    for tenant_id, terms in sorted(tiered.items()):
        states = {level: await tier_states(session, tenant_id, list(terms), level) for level in LEVELS}
        for term_id, levels in sorted(terms.items()):
            whole = (await read_blocks(session, tenant_id, [term_id], BLOCKS, with_pending=False)).get(term_id)
            for level in levels:
                tiers = await read_blocks(session, tenant_id, [term_id], level.postings, with_pending=False)
                where = f'{_name(level)} (tenant {tenant_id}, term {term_id})'
                _check_tier(report, where, states[level][term_id], whole, tiers.get(term_id, NO_POSTINGS))


def _name(level: Level) -> str:
    return 'deeper tier' if level.deep else 'tier'


def _check_tier(
    report: CheckReport, where: str, state: TierState, whole: PostingColumns | None, tier: PostingColumns
) -> None:
    """One tier against its whole list: exactly the postings reaching its cut, and its frontier a bound on the rest."""
    if whole is None:
        if len(tier.doc_ids):
            report.add('index', where, f'holds {len(tier.doc_ids)} postings of a term with none')
        return
    doc_ids, frequencies, lengths = whole
    reaching = reference_weights(frequencies, lengths, state.reference_length) >= state.cut
    tier_ids = tier.doc_ids
    if not np.array_equal(tier_ids, doc_ids[reaching]):
        stray = np.setdiff1d(tier_ids, doc_ids[reaching])
        lost = np.setdiff1d(doc_ids[reaching], tier_ids)
        report.add(
            'index',
            where,
            f'holds {len(stray)} postings below its cut or not in its list; lacks {len(lost)} that reach it',
        )
    else:
        at = np.searchsorted(doc_ids, tier_ids)
        if not (np.array_equal(tier.term_frequencies, frequencies[at]) and np.array_equal(tier.lengths, lengths[at])):
            report.add('index', where, "holds frequencies or lengths other than the list's")
    if len(tier_ids) > state.tier_postings:
        report.add('index', where, f'counts {state.tier_postings} postings; it holds {len(tier_ids)}')
    below = ~reaching
    unbounded = int((~_bounded(state.frontier, frequencies[below], lengths[below])).sum())
    if unbounded:
        report.add('index', where, f'has {unbounded} postings below its cut that its frontier does not bound')


def _bounded(frontier: NDArray[np.uint32], frequencies: NDArray[Any], lengths: NDArray[Any]) -> NDArray[np.bool_]:
    """Whether some pair of `frontier` has at least each posting's frequency and at most its length."""
    pairs = frontier_of(np.empty(0), np.empty(0), frontier).astype(np.int64)  # Highest frequency first.
    # Lengths fall as frequencies do: the pairs of at least a frequency are a prefix, its last the shortest.
    reach = np.searchsorted(-pairs[:, 0], -np.asarray(frequencies, dtype=np.int64), side='right')
    shortest = np.concatenate(([np.iinfo(np.int64).max], pairs[:, 1]))[reach]
    return shortest <= np.asarray(lengths, dtype=np.int64)
