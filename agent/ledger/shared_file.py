"""A SQLite ledger file that the replicas of one daemon share (one volume every replica mounts): the replica that
leads writes it, every other replica reads it read-only.

Which role this replica has is asked of ``leading`` at every call; when it changed, the file is reopened in the
new role: a replica that becomes the leader takes the writer lock (``agent.ledger.guard``) and resumes accrual
from each pool's newest entry, as a restarted daemon does; one that stops leading closes its writer, releasing
the lock, and reopens read-only. A write or a reservation asked of a standby is refused (``LedgerUnavailable``)
without touching the file. While the previous leader still holds the writer lock (it lost the lease but has not
noticed yet), the new leader's writes fail with that holder named, and succeed once it lets go: the tick holds
the pools meanwhile, as for any ledger outage.

Reservations live in the writing process (``agent.ledger.reservations.ReservationBook``), so a new leader starts
with none: the previous leader's scale-ups are recorded spend by then.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType

from agent.ledger.base import Newest
from agent.ledger.billed import BilledCost
from agent.ledger.period_spend import SpendAsk
from agent.ledger.reservations import CountedTo, Grant, Holder, ReservationRequest
from agent.ledger.sqlite import SqliteLedger
from models import LedgerEntry, LedgerUnavailable


def _never() -> bool:
    return False


class LeaderWrittenLedger:
    """The ledger in the SQLite file at ``path``, written only while ``leading()`` says this replica leads.

    Until ``follow`` names the leadership to ask, the replica is a standby."""

    def __init__(self, path: str | Path, *, fresh_if_empty: bool = False, retention: timedelta | None = None) -> None:
        self.path = Path(path)
        self._fresh_if_empty = fresh_if_empty
        self._retention = retention
        self._leading: Callable[[], bool] = _never
        self._lock = threading.RLock()
        self._open: SqliteLedger | None = None

    def follow(self, leading: Callable[[], bool]) -> None:
        """Write while ``leading()`` is true; read only otherwise."""
        self._leading = leading

    @property
    def writing(self) -> bool:
        """Whether this replica writes the file now (it leads)."""
        return self._leading()

    # -- Ledger -------------------------------------------------------------------------------------------
    def record(self, entry: LedgerEntry) -> None:
        self.record_many([entry])

    def record_many(self, entries: Sequence[LedgerEntry]) -> None:
        with self._lock:
            self._writer("record spend in").record_many(entries)

    def update(self, pools: Sequence[str], derive: Callable[[Newest], Sequence[LedgerEntry]]) -> None:
        with self._lock:
            self._writer("record spend in").update(pools, derive)

    def spent(self, pools: Sequence[str], start: datetime, end: datetime) -> float:
        with self._lock:
            return self._current().spent(pools, start, end)

    def spent_in_periods(self, asks: Sequence[SpendAsk], now: datetime) -> list[float]:
        with self._lock:
            return self._current().spent_in_periods(asks, now)

    def billed_intervals(self, pools: Sequence[str], start: datetime, end: datetime) -> list[BilledCost]:
        """The file's billed intervals (``agent.ledger.billed.BilledIntervals``), for the spend meter."""
        with self._lock:
            return self._current().billed_intervals(pools, start, end)

    def last_entry(self, pool_id: str) -> LedgerEntry | None:
        with self._lock:
            return self._current().last_entry(pool_id)

    @property
    def where(self) -> str:
        return str(self.path)

    def recorded_since(self, pools: Sequence[str]) -> dict[str, datetime]:
        with self._lock:
            return self._current().recorded_since(pools)

    def entries(self, pool_id: str | None = None) -> list[LedgerEntry]:
        with self._lock:
            return self._current().entries(pool_id)

    # -- Reservations -------------------------------------------------------------------------------------
    def reserve(self, request: ReservationRequest, now: datetime) -> Grant:
        return self.reserve_many([request], now)[0]

    def reserve_many(
        self,
        requests: Sequence[ReservationRequest],
        now: datetime,
        replacing: Sequence[int] = (),
        replacing_holder: Holder | None = None,
    ) -> list[Grant]:
        with self._lock:
            return self._writer("reserve budget in").reserve_many(requests, now, replacing, replacing_holder)

    def release(self, reservation_ids: Sequence[int]) -> None:
        with self._lock:
            if self._open is not None and not self._open.read_only:
                self._open.release(reservation_ids)

    def reserved(self, budget: str, now: datetime) -> float:
        with self._lock:
            if self._open is None or self._open.read_only:
                return 0.0  # a standby holds no reservation
            return self._open.reserved(budget, now)

    def reserved_by_others(
        self,
        budgets: Sequence[str],
        now: datetime,
        holder: Holder,
        mine: Sequence[int] = (),
        to: CountedTo | None = None,
    ) -> float:
        with self._lock:
            if self._open is None or self._open.read_only:
                return 0.0  # a standby holds no reservation
            return self._open.reserved_by_others(budgets, now, holder, mine, to)

    # -- closing ------------------------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            if self._open is not None:
                self._open.close()
                self._open = None

    def __enter__(self) -> LeaderWrittenLedger:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------------------------
    def _writer(self, action: str) -> SqliteLedger:
        if not self._leading():
            raise LedgerUnavailable(
                f"cannot {action} the ledger {self.path}: this replica is a standby, and only the leader writes "
                "a ledger file the replicas share"
            )
        return self._current()

    def _current(self) -> SqliteLedger:
        """The file opened in the role this replica has now, reopened when the role changed."""
        read_only = not self._leading()
        if self._open is not None and self._open.read_only == read_only:
            return self._open
        self.close()
        if read_only:
            self._open = SqliteLedger(self.path, read_only=True)
        else:
            self._open = SqliteLedger(self.path, fresh_if_empty=self._fresh_if_empty, retention=self._retention)
        return self._open
