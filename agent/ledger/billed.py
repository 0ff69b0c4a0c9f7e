"""Billed cost beside the estimated one: what the cloud billed a pool for an interval, imported from a billing
export (``agent.ledger.billing_export``), kept by the database ledgers next to their entries.

Spend so far counts billed cost where it exists: an entry whose start lies in a billed interval of its pool is
replaced by that interval's billed cost (``spent`` of the SQLite and PostgreSQL ledgers, and the recorded spend
their reservations are decided on). A pool's billed intervals never overlap; importing an interval again
replaces what was stored for it, and any stored interval of the pool it overlaps, so importing the same export
twice counts it once.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class BilledCost:
    """What the bill charged one pool over its usage interval ``[start, end)``."""

    pool_id: str
    start: datetime
    end: datetime
    cost_usd: float

    def __post_init__(self) -> None:
        # Every store refuses it alike (PostgreSQL's table has the same check): a bill with no interval is a bug.
        if self.end <= self.start:
            raise ValueError(
                f"billed cost of pool {self.pool_id!r}: usage end {self.end.isoformat()} is not after its start "
                f"{self.start.isoformat()}"
            )


@dataclass(frozen=True)
class Reconciliation:
    """One pool over its billed intervals in a span: the estimated spend of the entries they cover, and the bill."""

    pool_id: str
    intervals: int
    estimated_usd: float
    billed_usd: float

    @property
    def difference_usd(self) -> float:
        return self.billed_usd - self.estimated_usd

    @property
    def difference_pct(self) -> float | None:
        """The difference as a share of the estimate, in percent; ``None`` when nothing was estimated."""
        return None if self.estimated_usd == 0.0 else 100.0 * self.difference_usd / self.estimated_usd


@runtime_checkable
class BilledCosts(Protocol):
    def record_billed(self, costs: Sequence[BilledCost]) -> None:
        """Store the billed costs in one transaction, each replacing what its pool had stored for any interval it
        overlaps."""
        ...

    def spent(self, pools: Sequence[str], start: datetime, end: datetime) -> float:
        """Spend so far: billed cost where it exists, the estimate elsewhere."""
        ...

    def estimated(self, pools: Sequence[str], start: datetime, end: datetime) -> float:
        """The estimated spend of ``pools`` in entries that start in [start, end), billed or not."""
        ...

    def billed(self, pools: Sequence[str], start: datetime, end: datetime) -> float:
        """The billed cost of ``pools`` in intervals that start in [start, end)."""
        ...

    def reconcile(self, pools: Sequence[str], start: datetime, end: datetime) -> list[Reconciliation]:
        """Per pool with billed intervals starting in [start, end): the estimate they cover and the bill."""
        ...


def overlaps(costs: Sequence[BilledCost]) -> list[tuple[BilledCost, BilledCost]]:
    """Pairs of intervals of one pool that overlap (which a ledger must never hold together)."""
    found = []
    ordered = sorted(costs, key=lambda c: (c.pool_id, c.start, c.end))
    for before, after in itertools.pairwise(ordered):
        if before.pool_id == after.pool_id and after.start < before.end:
            found.append((before, after))
    return found
