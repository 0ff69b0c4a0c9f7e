"""An in-memory ledger for simulation and tests; same rules as the SQLite one (budget reservations included),
nothing persisted.

Totals are answered from per-pool prefix sums, so a month-long simulation that asks every tick stays linear.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from agent.ledger.accrual import is_mark, resolve
from agent.ledger.base import Newest
from agent.ledger.folding import entries_on_grid, fold
from agent.ledger.reservations import InProcessReservations, ReservationBook
from models import LedgerEntry


@dataclass
class _PoolEntries:
    """One pool's entries sorted by start, with running totals (``totals[i]`` is the cost of the first i)."""

    starts: list[datetime] = field(default_factory=list)
    entries: list[LedgerEntry] = field(default_factory=list)
    totals: list[float] = field(default_factory=lambda: [0.0])
    newest: LedgerEntry | None = None

    def get(self, start: datetime) -> LedgerEntry | None:
        i = bisect_left(self.starts, start)
        return self.entries[i] if i < len(self.starts) and self.starts[i] == start else None

    def put(self, entry: LedgerEntry) -> None:
        i = bisect_left(self.starts, entry.start)
        if i < len(self.starts) and self.starts[i] == entry.start:
            self.entries[i] = entry
        else:
            self.starts.insert(i, entry.start)
            self.entries.insert(i, entry)
            self.totals.append(0.0)
        for j in range(i, len(self.entries)):  # usually only the newest entry: accrual appends in time order
            self.totals[j + 1] = self.totals[j] + self.entries[j].cost_usd
        if self.newest is None or (entry.end, entry.start) >= (self.newest.end, self.newest.start):
            self.newest = entry

    def charged(self) -> LedgerEntry | None:
        """The newest charged entry (not a mark) when it ends where the newest entry does."""
        if self.newest is None or not is_mark(self.newest):
            return self.newest
        i = bisect_left(self.starts, self.newest.start)
        before = self.entries[i - 1] if i > 0 else None
        return before if before is not None and before.end == self.newest.end and not is_mark(before) else None

    def drop_mark(self, start: datetime) -> None:
        i = bisect_left(self.starts, start)
        if i == len(self.starts) or self.starts[i] != start or not is_mark(self.entries[i]):
            return
        del self.starts[i], self.entries[i], self.totals[i + 1]  # a mark costs nothing: later totals stand
        if self.newest is not None and self.newest.start == start and is_mark(self.newest):
            self.newest = max(self.entries, key=lambda e: (e.end, e.start), default=None)

    def total(self, start: datetime, end: datetime) -> float:
        lo, hi = bisect_left(self.starts, start), bisect_left(self.starts, end)
        return self.totals[hi] - self.totals[lo] if hi > lo else 0.0


class InMemoryLedger(InProcessReservations):
    where = "process memory (kept only while the process runs)"

    def __init__(self) -> None:
        self._pools: dict[str, _PoolEntries] = {}
        self._book = ReservationBook(self.spent)

    def record(self, entry: LedgerEntry) -> None:
        self.record_many([entry])

    def record_many(self, entries: Sequence[LedgerEntry]) -> None:
        """Entries are stored cut on the grid (``folding.entries_on_grid``), as the database ledgers store them."""
        self._store(entries_on_grid(entries))

    def _store(self, pieces: Sequence[LedgerEntry]) -> None:
        """Store entries already cut on the grid, each as ``resolve`` says."""
        for piece in pieces:
            pool = self._pools.get(piece.pool_id)
            if pool is None:
                pool = self._pools[piece.pool_id] = _PoolEntries()
            stored = resolve(pool.get(piece.start), piece)
            if stored is not None:
                pool.put(stored)

    def update(self, pools: Sequence[str], derive: Callable[[Newest], Sequence[LedgerEntry]]) -> None:
        """Charged intervals are folded into the pool's newest charged entry where they continue it
        (``agent.ledger.folding``), as the database ledgers fold them."""
        charged = {pool: self._pools[pool].charged() if pool in self._pools else None for pool in pools}
        folded = fold(charged, derive({pool: self.last_entry(pool) for pool in pools}))
        self._store(folded.entries)  # ``fold`` cut them on the grid: cutting them again would find nothing to cut
        for _, extended in folded.extended:
            self._pools[extended.pool_id].put(extended)
        for pool, start in folded.dropped:
            self._pools[pool].drop_mark(start)

    def spent(self, pools: Sequence[str], start: datetime, end: datetime) -> float:
        return sum(self._pools[p].total(start, end) for p in set(pools) if p in self._pools)

    def last_entry(self, pool_id: str) -> LedgerEntry | None:
        pool = self._pools.get(pool_id)
        return None if pool is None else pool.newest

    def recorded_since(self, pools: Sequence[str]) -> dict[str, datetime]:
        return {p: self._pools[p].starts[0] for p in sorted(set(pools)) if p in self._pools and self._pools[p].starts}

    def entries(self) -> list[LedgerEntry]:
        return sorted((e for p in self._pools.values() for e in p.entries), key=lambda e: (e.start, e.pool_id))
