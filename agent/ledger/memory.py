"""An in-memory ledger for simulation and tests."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from models import LedgerEntry


class InMemoryLedger:
    def __init__(self) -> None:
        self._entries: dict[tuple[str, datetime], LedgerEntry] = {}
        self._last: dict[str, datetime] = {}

    def record(self, entry: LedgerEntry) -> None:
        key = (entry.pool_id, entry.start)
        if key in self._entries:
            return
        self._entries[key] = entry
        last = self._last.get(entry.pool_id)
        if last is None or entry.end > last:
            self._last[entry.pool_id] = entry.end

    def spent(self, pools: Sequence[str], start: datetime, end: datetime) -> float:
        wanted = set(pools)
        return sum(e.cost_usd for (pool, at), e in self._entries.items() if pool in wanted and start <= at < end)

    def last_recorded(self, pool_id: str) -> datetime | None:
        return self._last.get(pool_id)

    def entries(self) -> list[LedgerEntry]:
        return sorted(self._entries.values(), key=lambda e: (e.start, e.pool_id))
