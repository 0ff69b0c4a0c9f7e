"""The Ledger interface: spend entries in, totals out. Implementations must not lose or double-count."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from models import LedgerEntry


class Ledger(Protocol):
    def record(self, entry: LedgerEntry) -> None:
        """Add spend for [entry.start, entry.end). Recording the same pool and start twice has no effect."""
        ...

    def spent(self, pools: Sequence[str], start: datetime, end: datetime) -> float:
        """Spend of ``pools`` in entries that start in [start, end)."""
        ...

    def last_recorded(self, pool_id: str) -> datetime | None:
        """End of the newest entry for the pool, so accrual resumes where it stopped after a restart."""
        ...
