"""Ledger coverage: whether the ledger holds the whole of a monthly-capped budget's current period.

A ledger that began after the period started (a new pod's file on an ``emptyDir``, a first install mid-month) reads
the spend before its first record as nothing, so the cap counts only the spend since then. It is judged per pool:
each of the budget's own pools (not those other agents run) must have a record at or before the period's start,
since a bill imported for some pools only (a standard export bills GPU node pools, not TPU slices) fills the
period for those alone. A pool's first record is the earliest under its id or its previous ids
(``agent.ledger.pool_ids``). The spend meter asks for it (``SpendMeter.coverage``); the loop alerts and the daemon
exports it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from agent.ledger.pool_ids import Previous, own_pools
from agent.planning.budget import Budget


@dataclass(frozen=True)
class LedgerCoverage:
    """Since when the ledger holds a budget's spend, against the start of the budget's current month period:
    ``first`` is the first record of each of the budget's own pools (``None``: it has none yet)."""

    budget: str
    period_start: datetime
    period_end: datetime
    first: tuple[tuple[str, datetime | None], ...]
    where: str

    @property
    def since(self) -> datetime | None:
        """Since when the ledger holds every pool of the budget: the latest of their first records (``None`` while
        one has none)."""
        firsts = [at for _, at in self.first]
        return None if not firsts or None in firsts else max(at for at in firsts if at is not None)

    @property
    def late(self) -> tuple[tuple[str, datetime | None], ...]:
        """The pools whose first record is later than the period's start, or that have none."""
        return tuple((pool, at) for pool, at in self.first if at is None or at > self.period_start)

    @property
    def complete(self) -> bool:
        """Whether the ledger holds the whole period so far: every pool has a record at or before its start."""
        return not self.late

    def late_pools(self, when: Callable[[datetime], str] = datetime.isoformat) -> str:
        """The late pools for a message: ``v5e-slices (first record <when>), h100 (no record yet)``."""
        return ", ".join(
            f"{pool} ({'no record yet' if at is None else f'first record {when(at)}'})" for pool, at in self.late
        )


NEW_OR_LOST = (
    "a pool created after the period started had no spend before its first record, but the ledger cannot tell it "
    "from one whose records were lost, or one renamed whose old id is not among its previous_ids"
)


def ledger_coverage(
    budget: Budget, now: datetime, first: Mapping[str, datetime], where: str, previous: Previous | None = None
) -> LedgerCoverage:
    """The coverage of ``budget``'s current month period, from the first records of its pools (``first``, as
    ``RecordedSince.recorded_since`` reads them), a pool's first being the earliest under its id or its
    ``previous`` ones."""
    period = budget.period(now)
    pools = []
    for pool in own_pools(budget):
        found = [first[i] for i in (pool, *(previous or {}).get(pool, ())) if i in first]
        pools.append((pool, min(found) if found else None))
    return LedgerCoverage(budget.name, period.start, period.end, tuple(pools), where)
