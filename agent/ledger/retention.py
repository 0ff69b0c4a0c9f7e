"""Retention: the database ledgers remove entries and billed costs older than ``ledger.retention`` as they record
spend, so the ledger stops growing once it holds that long a history.

Removed are a pool's entries and billed costs that end at least ``retention`` before the newest interval just
recorded, except each pool's earliest entry and earliest billed cost: the first record of each pool is what the
coverage check reads (``RecordedSince.recorded_since``), and it stays where it was. A retention of at least
``MINIMUM`` keeps the current and the previous month whole in any time zone (a month is at most 31 days, a zone
at most 14 hours from UTC), so no spend figure the agent reads (month and hour to date, the previous month's spend
in reports) changes; reports over older spans see only what is left.

The ledger removes them inside the write transaction of ``update``, at most ``BATCH`` rows of each table at a time
and once per ``EVERY`` of recorded time once nothing older is left, so a tick's work stays bounded: a year of
history past the retention, when it is first set, goes over the following ticks. The SQLite ledger then gives the
space the removed rows held back to the file system (``agent.ledger.sqlite_space``).

The newest end just recorded is stamped by a wall clock, which may be far ahead (a bad NTP answer, a replica whose
clock runs ahead, a restart on a node set wrong): measured from it alone, a clock 100 days ahead removed every pool's
current month, another agent's too on a shared ledger, for good. The cutoff is measured from a clock of the ledger's
own (``due``'s ``now``) where the newest end is past it: the PostgreSQL server's clock, and for SQLite this process's
wall time carried on its monotonic clock (``SteadyWall``). An end more than ``AHEAD_TOLERANCE`` past it is told in a
warning, once until the ends are back within it.

``SteadyWall`` started from the wall time read when the ledger was opened, so a writer that opened it with its clock
ahead (an agent restarted on a node set 100 days ahead, a replica taking over a shared file) measured the cutoff by
that clock all the same: one reading then removed every pool's history but its first entry (5,760 USD of three days
down to 20), with no warning. Rows removed are gone for good, so the SQLite ledger's clock now starts from the
newest end the file held when it was opened where that is earlier (``SteadyWall.hold_to``): a writer removes only
what the file's own history put past the retention, plus the time it has run since on its monotonic clock, whatever
its wall clock says, and tells an entry it records past that clock as above. Holding only one write to the newest
end before it would not do: the next write finds the first one's entry, 100 days ahead, the newest.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from models import LedgerEntry
from models.clock import Clock, SystemClock

log = logging.getLogger(__name__)

MINIMUM = timedelta(days=64)
DEFAULT = timedelta(days=400)  # 13 months and more: last year's same month is still whole
BATCH = 5_000
EVERY = timedelta(hours=1)
# How far past the ledger's clock an entry just recorded may end before the warning: readings are recorded right
# after they are taken, and the clocks of nodes kept by NTP differ by well under a second.
AHEAD_TOLERANCE = timedelta(minutes=10)


@dataclass
class Pruning:
    """When a ledger that keeps ``retention`` of history (``None``: all of it) removes older rows next."""

    retention: timedelta | None
    clock: str = "the ledger's clock"  # what ``due``'s ``now`` reads, for the warning
    _done_until: datetime | None = None  # the cutoff up to which nothing older is left
    _ahead: bool = False  # the last entries recorded were found past the clock, and told

    def __post_init__(self) -> None:
        if self.retention is not None and self.retention < MINIMUM:
            raise ValueError(f"a ledger retention must be at least {MINIMUM.days} days, got {self.retention}")

    def due(self, recorded: Sequence[LedgerEntry], now: Callable[[], datetime]) -> datetime | None:
        """The cutoff to remove rows ending at or before, after recording ``recorded``; ``None``: not now. The
        cutoff is ``retention`` before the newest end recorded, or before ``now()`` (read only when a removal is due
        by the newest end) where that end is past it."""
        if self.retention is None or not recorded:
            return None
        newest = max(e.end for e in recorded)
        if not self._due_at(newest - self.retention):
            return None
        clock = now()
        if newest > clock + AHEAD_TOLERANCE and not self._ahead:
            log.warning(
                "ledger retention: an entry just recorded ends at %s, %s past %s (%s): its writer's wall clock is "
                "ahead (check the time sync of the node that wrote it); entries are removed only up to %s, the "
                "retention (%s) before that clock's time",
                newest.isoformat(),
                newest - clock,
                self.clock,
                clock.isoformat(),
                (clock - self.retention).isoformat(),
                self.retention,
                extra={"ahead_s": (newest - clock).total_seconds()},
            )
        self._ahead = newest > clock + AHEAD_TOLERANCE
        cutoff = min(newest, clock) - self.retention
        return cutoff if self._due_at(cutoff) else None

    def _due_at(self, cutoff: datetime) -> bool:
        return self._done_until is None or cutoff >= self._done_until + EVERY

    def removed(self, cutoff: datetime, rows: int) -> None:
        """``rows`` were removed up to ``cutoff``: fewer than a batch of each table means none older is left."""
        if rows < BATCH:
            self._done_until = cutoff


class SteadyWall:
    """The wall time carried on the monotonic clock from the time it was first read, or from the ledger's newest end
    when it was opened where that is earlier (``hold_to``): a step forward of the wall clock does not move it, nor
    does a clock already ahead when the ledger is opened; a step back does (it is never later than the wall clock).
    A ledger without a clock of its own (SQLite) measures its retention by it."""

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock = clock or SystemClock()
        self._last = (self._clock.now(), self._clock.monotonic())

    def hold_to(self, end: datetime | None) -> None:
        """Start from ``end`` (the newest end the ledger held when it was opened; ``None``: none) where it is earlier
        than the wall time read first: time carried from there runs on the monotonic clock. After the ledger was not
        written for a while, its retention lags by that while, for this process: rows are kept that long more."""
        if end is not None and end < self._last[0]:
            self._last = (end, self._last[1])

    def now(self) -> datetime:
        wall, mono = self._clock.now(), self._clock.monotonic()
        wall = min(wall, self._last[0] + timedelta(seconds=max(0.0, mono - self._last[1])))
        self._last = (wall, mono)
        return wall
