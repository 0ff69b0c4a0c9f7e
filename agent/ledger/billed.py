"""Billed cost beside the estimated one: what the cloud billed a pool for an interval, imported from a billing
export (``agent.ledger.billing_export``), kept by the database ledgers next to their entries.

Spend so far counts billed cost where it exists: an entry whose start lies in a billed interval of its pool is
replaced by that interval's billed cost (``spent`` of the SQLite and PostgreSQL ledgers, and the recorded spend
their reservations are decided on). A pool's billed intervals never overlap; importing an interval again
replaces what was stored for it, and any stored interval of the pool it overlaps, so importing the same export
twice counts it once.

A bill is stored cut on the entries' grid (``accrual.GRID``, 15 minutes of UTC; ``on_grid``), so that every
budget period, which starts on that grid in any time zone, starts a stored piece: a billing row across a period's
start (an hourly row and a budget in a half-hour zone, a daily row) counts in each period for its part there, and
replaces the estimate of each period's part. How the cloud spread the bill within its row is not known; each
piece gets the share of the bill for its share of the row's time, the assumption the estimate makes too (held
units cost the same every minute). A row a day long is 96 pieces per pool: no more than the entries the ledger
already keeps for the same day. A row whose edges are off the grid keeps them, its first and last pieces shorter.

The spend of a pool that could not be read, counted up to now without being recorded (``agent.ledger.meter``),
leaves out its pieces that start in a billed interval of the pool (``BilledIntervals``), as the entries recorded
for them will be left out once the pool is read again: a bill imported for hours the pool was not read counts them
once.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

from agent.ledger.accrual import GRID, split


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
    """One pool over its billed intervals in a span: the hours they cover (the stored pieces', which start in the
    span), the estimated spend of the entries they cover, and the bill."""

    pool_id: str
    hours: float
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
class BilledIntervals(Protocol):
    def billed_intervals(self, pools: Sequence[str], start: datetime, end: datetime) -> list[BilledCost]:
        """The stored pieces of ``pools``' bills that overlap [start, end), by pool and start: what the spend meter
        leaves out of an unread pool's unrecorded spend (``agent.ledger.meter``), as ``spent`` leaves out the
        entries a bill covers."""
        ...


@runtime_checkable
class BilledCosts(BilledIntervals, Protocol):
    def record_billed(self, costs: Sequence[BilledCost]) -> None:
        """Store the billed costs in one transaction, cut on the grid (``on_grid``), each piece replacing what its
        pool had stored for any interval it overlaps."""
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


def on_grid(costs: Sequence[BilledCost], grid: timedelta = GRID) -> list[BilledCost]:
    """The costs cut at every multiple of ``grid`` since the Unix epoch, as accrual cuts entries, each piece with
    the share of its cost for its share of the time; a cost's pieces add up to it (the last takes the rounding)."""
    pieces: list[BilledCost] = []
    for cost in costs:
        spans = split(cost.start, cost.end, grid)
        given = 0.0
        for i, (start, end) in enumerate(spans):
            share = (
                cost.cost_usd - given
                if i == len(spans) - 1
                else cost.cost_usd * ((end - start) / (cost.end - cost.start))
            )
            given += share
            pieces.append(BilledCost(cost.pool_id, start, end, share))
    return pieces
