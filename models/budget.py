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
    """Spend of a budget's pools in the current period, the cap it is held to, and the spend projected to the period's
    end. For a cap other agents share (monthly, or hourly: its period the hour), the projection counts what they keep
    reserved in the period (``reserved_elsewhere_usd``, the units they hold): the figure the overspend check holds the
    cap to. It is not spend: ``spent_usd`` and ``remaining_usd`` are what the ledger recorded.
    ``reserved_elsewhere_usd`` is ``None`` where the projection counts no other agent's units (a budget not shared),
    not zero. With a commit horizon, the other agents may reserve their units over a horizon only: their share is
    carried to the period's end here, as the agent's own units are projected to it."""

    budget: str
    period_start: datetime
    period_end: datetime
    spent_usd: float
    cap_usd: float | None
    projected_usd: float
    reserved_elsewhere_usd: float | None = None  # of ``projected_usd``, the other agents' reservations in the period

    @property
    def remaining_usd(self) -> float | None:
        return None if self.cap_usd is None else self.cap_usd - self.spent_usd
