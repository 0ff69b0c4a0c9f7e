"""Spend so far in budget periods, asked all at once: what the spend meter reads every tick.

A budget's spend so far in its period is ``spent(pools, period.start, now)``. Summing the entries for that costs
O(entries since the period started), growing all month. A ledger that keeps running totals per (pool, period)
(``agent.ledger.postgres_totals``, ``agent.ledger.sqlite_totals``) answers it from the period's total less the
spend of entries that start from ``now`` to the period's end (none or a few), so the read stays O(pools). Spend
is additive over a split point, so that difference is exactly the sum over [start, now), billed costs included.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class SpendAsk:
    """The spend of ``pools`` in entries that start in [period_start, until), inside the period that ends at
    ``period_end``: what the ledger keeps a running total of."""

    pools: tuple[str, ...]
    period_start: datetime
    period_end: datetime
    until: datetime

    @property
    def within(self) -> bool:
        """Whether ``until`` lies in the period (else the period's total does not help)."""
        return self.period_start <= self.until <= self.period_end


@runtime_checkable
class PeriodSpend(Protocol):
    def spent_in_periods(self, asks: Sequence[SpendAsk], now: datetime) -> list[float]:
        """Each ask's spend, as ``spent(ask.pools, ask.period_start, ask.until)`` counts it, in the asks' order.
        ``now`` says which periods have ended (a ledger may drop its totals of those)."""
        ...
