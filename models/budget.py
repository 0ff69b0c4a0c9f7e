"""Spend records and budget snapshots."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class LedgerEntry:
    """Spend accrued by one pool over [start, end): units held times price times time."""

    pool_id: str
    start: datetime
    end: datetime
    units: int
    cost_usd: float


@dataclass(frozen=True)
class BudgetSnapshot:
    """Spend of a budget's pools in the current period, and the cap it is held to."""

    budget: str
    period_start: datetime
    period_end: datetime
    spent_usd: float
    cap_usd: float | None
    projected_usd: float

    @property
    def remaining_usd(self) -> float | None:
        return None if self.cap_usd is None else self.cap_usd - self.spent_usd
