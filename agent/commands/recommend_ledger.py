"""The spend ledger as ``leadtime recommend`` plans on it: the configured ledger read, never written.

The daemon plans each tick on the month's spend so far: what its ledger recorded, plus what the pools held since
its last tick, charged as the tick starts. A dry run must see the same spend and change nothing, so the configured
ledger is opened read-only (a SQLite file through a read-only connection, without the writer lock a running
daemon holds; a PostgreSQL database in read-only sessions, its schema checked but never created or migrated, see
``agent.ledger.postgres``) and what the dry-run tick charges is kept in memory on top of it. Charges start where
the ledger's newest entry of each pool ends (an opening mark, which costs nothing, or a charged interval), so
adding the two never counts an interval twice. Budget reservations are decided in memory over the same spend and
the configured ledger's live reservations, as the daemon's are decided against everyone's; what the other agents
sharing a budget keep reserved (``reserved_by_others``) is read from the configured ledger too, so that the dry run
projects a shared monthly cap with their units as the daemon does (the agents of a PostgreSQL ledger; a SQLite
ledger's reservations live in the process that writes it, and a dry run sees none).

No ledger file at ``ledger.path``, a PostgreSQL database no daemon has written yet, or ``ledger.backend: memory``
leaves the month's spend unknown: the dry run plans as if nothing was spent yet, and says so
(``MonthToDate.known``), and no more: with no records but its own it judges no budget's period held in part.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from agent.ledger.base import Ledger, Newest, RecordedSince
from agent.ledger.billed import BilledCost, BilledIntervals
from agent.ledger.memory import InMemoryLedger
from agent.ledger.reservations import CountedTo, Holder, InProcessReservations, ReservationBook, Reservations
from config.ledger import LedgerSettings
from models import LedgerEntry

UNKNOWN = "month-to-date spend unknown, assumed 0"


@dataclass(frozen=True)
class MonthToDate:
    """Where the dry run read the spend so far from (``known``), or why it could not (``note``)."""

    backend: str
    where: str | None
    known: bool
    note: str

    def as_json(self) -> dict[str, object]:
        return {"backend": self.backend, "where": self.where, "spend_known": self.known, "note": self.note}


class ReadOnlyLedger(InProcessReservations):
    """``recorded`` (``None``: no ledger) read, and the dry-run tick's charges kept in memory beside it.

    Without a ledger that says since when it holds each pool (no ledger file, ``ledger.backend: memory``) it is not
    an ``agent.ledger.base.RecordedSince``: its only records are the dry run's own charges, which begin now, so the
    budgets are not judged held in part (no import of billed costs would change that) and the report says only that
    the spend so far is unknown (``MonthToDate.note``)."""

    def __init__(self, recorded: Ledger | None) -> None:
        self.recorded = recorded
        self.charged = InMemoryLedger()
        self._book = ReservationBook(self.spent, self._reserved_in_ledger)

    def record(self, entry: LedgerEntry) -> None:
        self.charged.record(entry)

    def record_many(self, entries: Sequence[LedgerEntry]) -> None:
        self.charged.record_many(entries)

    def update(self, pools: Sequence[str], derive: Callable[[Newest], Sequence[LedgerEntry]]) -> None:
        self.charged.record_many(derive({pool: self.last_entry(pool) for pool in pools}))

    def spent(self, pools: Sequence[str], start: datetime, end: datetime) -> float:
        """The ledger's spend and the dry run's charges, less those a bill in the ledger covers (``billed``)."""
        recorded = self.recorded.spent(pools, start, end) if self.recorded is not None else 0.0
        return recorded + self.charged.spent(pools, start, end) - self._billed(pools, start, end)

    def _billed(self, pools: Sequence[str], start: datetime, end: datetime) -> float:
        """The dry run's charges in [start, end) that start in a billed interval of their pool: the ledger's spend
        counts the bill for those hours, as it would in place of the daemon's entries recorded there."""
        if not isinstance(self.recorded, BilledIntervals):
            return 0.0
        wanted = set(pools)
        mine = [e for e in self.charged.entries() if e.pool_id in wanted and start <= e.start < end]
        if not mine:
            return 0.0
        bills = self.recorded.billed_intervals(
            sorted({e.pool_id for e in mine}), min(e.start for e in mine), max(e.end for e in mine)
        )
        return sum(
            e.cost_usd for e in mine if any(b.pool_id == e.pool_id and b.start <= e.start < b.end for b in bills)
        )

    def billed_intervals(self, pools: Sequence[str], start: datetime, end: datetime) -> list[BilledCost]:
        """The billed pieces of ``pools`` overlapping [start, end) in the ledger read (none without one, or in one
        that keeps no bills): the spend meter leaves them out of an unread pool's unrecorded spend, as the daemon's
        does (``agent.ledger.billed.BilledIntervals``), since ``spent`` counts the bill for them."""
        if isinstance(self.recorded, BilledIntervals):
            return self.recorded.billed_intervals(pools, start, end)
        return []

    def reserved_by_others(
        self,
        budgets: Sequence[str],
        now: datetime,
        holder: Holder,
        mine: Sequence[int] = (),
        to: CountedTo | None = None,
    ) -> float:
        """What the other agents keep reserved in the ledger read (a SELECT: nothing is written), beside any of the
        dry run's own in memory not ``holder``'s. ``mine`` numbers the dry run's reservations, not the ledger's."""
        theirs = 0.0
        if isinstance(self.recorded, Reservations):
            theirs = self.recorded.reserved_by_others(budgets, now, holder, to=to)
        return theirs + self._book.reserved_by_others(budgets, now, holder, mine, to)

    def _reserved_in_ledger(self, keys: Sequence[str], now: datetime) -> float:
        """Everything the ledger read keeps reserved under ``keys``, the deployment's own standing reservations
        included: the daemon's scale-up is decided against all of them (it replaces its own only afterwards)."""
        if not isinstance(self.recorded, Reservations):
            return 0.0
        return sum(self.recorded.reserved(key, now) for key in keys)

    def last_entry(self, pool_id: str) -> LedgerEntry | None:
        mine = self.charged.last_entry(pool_id)
        theirs = self.recorded.last_entry(pool_id) if self.recorded is not None else None
        if mine is None or theirs is None:
            return mine or theirs
        return max(theirs, mine, key=lambda e: (e.end, e.start))


class RecordedLedger(Ledger, RecordedSince, Protocol):
    """A ledger that says since when it holds each pool."""


class ReadOnlyRecordedLedger(ReadOnlyLedger):
    """A ledger read that says since when it holds each pool as the daemon's ledger would
    (``agent.ledger.base.RecordedSince``): so the dry run sees a budget's period held only in part, as the daemon
    does."""

    def __init__(self, recorded: RecordedLedger) -> None:
        super().__init__(recorded)
        self._since = recorded

    @property
    def where(self) -> str:
        return self._since.where

    def recorded_since(self, pools: Sequence[str]) -> dict[str, datetime]:
        """The first record of each pool in the ledger, or else among the dry run's charges (an opening mark, as the
        daemon would record at its first observation)."""
        theirs = self._since.recorded_since(pools)
        mine = self.charged.recorded_since(pools)
        return {p: min(at for at in (theirs.get(p), mine.get(p)) if at is not None) for p in {*theirs, *mine}}


def read_only(recorded: Ledger) -> ReadOnlyLedger:
    """``recorded`` read with the dry run's charges beside it; judged for coverage only if it can say since when it
    holds each pool."""
    if isinstance(recorded, RecordedSince):
        return ReadOnlyRecordedLedger(recorded)
    return ReadOnlyLedger(recorded)


@contextmanager
def open_read_only(settings: LedgerSettings) -> Iterator[tuple[ReadOnlyLedger, MonthToDate]]:
    """The configured ledger, read-only, for one dry run; closed afterwards."""
    if settings.backend == "memory":
        yield ReadOnlyLedger(None), MonthToDate("memory", None, False, f"{UNKNOWN}: ledger.backend is memory")
        return
    recorded: Ledger
    if settings.backend == "postgresql":
        from agent.ledger.factory import open_ledger  # the PostgreSQL driver: only when that ledger is read
        from models import NoLedgerSchema

        try:
            recorded = open_ledger(settings, read_only=True)
        except NoLedgerSchema as exc:
            yield ReadOnlyLedger(None), MonthToDate("postgresql", settings.url, False, f"{UNKNOWN}: {exc}")
            return
        where = getattr(recorded, "where", settings.url)
    else:
        from agent.ledger.sqlite import SqliteLedger

        path = Path(settings.path)
        if not path.exists():
            note = f"{UNKNOWN}: there is no ledger file at {path} (ledger.path)"
            yield ReadOnlyLedger(None), MonthToDate("sqlite", str(path), False, note)
            return
        recorded, where = SqliteLedger(path, read_only=True), str(path)
    try:
        note = f"month-to-date spend read from the {settings.backend} ledger at {where} (read-only)"
        yield read_only(recorded), MonthToDate(settings.backend, where, True, note)
    finally:
        close = getattr(recorded, "close", None)
        if callable(close):
            close()
