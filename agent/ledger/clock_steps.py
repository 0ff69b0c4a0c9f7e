"""Readings taken while the wall clock is behind the ledger, or stepped forward: how accrual is to charge them, and
the warnings.

A reading is stamped with the wall time, and accrual adds nothing for a reading older than the pool's newest entry
(which makes replays harmless). After the wall clock steps back (NTP, a VM resumed), every reading is older than
that entry until the wall clock has caught up, so the real time in between would go uncharged, silently. What
passed is measured instead on the monotonic clock (``PoolReading.monotonic_s``): a reading behind the pool's newest
entry, when the pool's previous reading is the one the entry ends at (another writer's entry, or one written before
a restart, says nothing about this process's monotonic clock), is charged the monotonic time since that reading, at
the units the pool held, on a piece of one microsecond (``CATCH_UP_PIECE``) at the end of that entry: the entry
grows by the cost, not by the time, so the ledger stays where it was and the wall clock catches up with it after
the step. The reading that finds the wall clock caught up is charged the time since the entry's end as any reading
is, and the part of the monotonic time since the previous reading that this does not cover (the wall time from
that reading to the entry's end) on top: the time that really passed is charged once, whatever the step. Placed at
the entry's end plus the monotonic time instead, the readings moved the ledger on as fast as the wall clock went,
so it stayed ahead by the whole step for good, and a restart put it further ahead.

Without such a previous reading (another replica writing the same ledger is ahead, or the first reading after a
restart), the reading adds nothing, as before, says nothing (two replicas charging one ledger meet it at every tick
they collide), and becomes the point the next one is measured from: once that entry is still the newest at the next
reading, the clock is this process's, and that reading is charged. Without a monotonic time the reading adds nothing
either. A step is told once per pool, in one warning per write: when the pool's readings are first found behind
their own, and again if they fall further behind.

A step forward (a bad NTP answer, a clock set by hand, NTP setting a slow clock right) is measured the same way: a
reading whose wall time is past the pool's previous reading's WALL time by more than the monotonic time since it plus
``STEP_TOLERANCE`` is placed at where that reading was recorded plus the monotonic time (``Placed.ahead``: how far the
wall clock is past it), and so charged the time that passed, at the units held, on the entries of the time it passed
in. Charged by its wall time, one reading 100 days ahead (a bad answer, corrected at the next reading) charged 100
days of an unwatched gap, and the ledger's end stood 100 days ahead, so that once the clock came back every real
reading was charged on a piece at that end, in a future month. The next reading is compared with that reading's wall
time, not where it was placed: one whose wall time is within the tolerance of the monotonic time since it says the
wall clock holds its new time, and is recorded where it was read, the time from where the previous one was placed
charged as any interval is: the ledger catches up with the wall clock at the next reading and stays with it. A reading
at the same instant as a previous one placed back (less than ``STEP_TOLERANCE`` since it on the monotonic clock: the
agent's own scale-up, recorded in the tick that read the pool) says nothing of whether the clock keeps its new time,
and is placed with that one (its place plus the monotonic time since, the same step ahead); taken as the clock
keeping its time, it was recorded where it was read, and a tick 100 days ahead that also scaled up charged the 100
days as a gap at the new units and left the ledger's end 100 days ahead.
Compared with where the previous reading was placed instead, every later reading was found ahead by the step again,
so a step forward the wall clock kept (NTP setting a slow clock right; a VM suspended, on a monotonic clock that
stands still while suspended) was never charged and left the ledger behind the wall clock for good, its current-hour
spend read as nothing. The monotonic time counts a suspend where the platform can (``models.clock.steady_seconds``),
so a suspend is no step at all there. A reading without a monotonic time (a replay, a simulation, whose clock never
steps) or without a previous reading of this process is taken at its wall time, as before. The step is told once per
pool, and again if the clock goes further ahead.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from agent.ledger.accrual import GRID, Accrual, PoolReading, accrue, is_mark
from models import LedgerEntry

log = logging.getLogger("agent.ledger.meter")

# How much further behind a pool's readings must fall to be told as another step: the wall and monotonic clocks
# drift apart by milliseconds a minute while NTP slews the wall clock.
STEP_TOLERANCE = timedelta(seconds=1)
# The length of the piece a reading behind the ledger is charged on: not an opening mark (those cost nothing), and
# short enough that a day of readings every second moves the ledger on by a tenth of a second.
CATCH_UP_PIECE = timedelta(microseconds=1)

# Where a pool's last reading was recorded, its monotonic seconds then, whether it was charged behind the ledger, and
# the wall time it was read at (a step forward is measured from it).
Baseline = tuple[datetime, float | None, bool, datetime]


@dataclass(frozen=True)
class Placed:
    """A reading as accrual is to take it: ``reading`` with its time moved to the end of the piece it is charged on
    when the wall clock was ``behind`` the pool's newest entry, ``charged`` the monotonic time it adds there
    (``None``: it adds nothing, the time not known); ``uncovered``: of a reading that finds the wall clock caught up,
    the monotonic time since the previous reading the wall time since the entry's end does not cover; ``quiet``:
    behind another writer's entry, or one recorded before this process: no step of its clock to tell; ``ahead``: the
    wall clock stepped forward, by this much past the time the reading is placed at (the pool's previous reading's
    plus the monotonic time since)."""

    reading: PoolReading
    behind: timedelta | None = None
    charged: timedelta | None = None
    uncovered: timedelta | None = None
    quiet: bool = False
    ahead: timedelta | None = None

    @property
    def read_at(self) -> datetime:
        """The wall time the reading was taken at, wherever it is placed."""
        if self.ahead is not None:
            return self.reading.at + self.ahead
        if self.behind is not None and self.charged is not None:
            return self.reading.at - CATCH_UP_PIECE - self.behind
        return self.reading.at

    @property
    def step(self) -> timedelta | None:
        """How far the wall clock is known to have stepped back: how far the reading is behind, and, charged, the
        time since the previous reading on top."""
        if self.behind is None:
            return None
        return self.behind if self.charged is None else self.behind + self.charged


def place(newest: LedgerEntry | None, reading: PoolReading, previous: Baseline | None) -> Placed:
    """How ``reading`` is charged, given the pool's newest entry and its previous reading (``previous``)."""
    if newest is None:
        return Placed(reading)
    own = previous is not None and previous[0] == newest.end
    elapsed = None
    if own and previous is not None and reading.monotonic_s is not None and previous[1] is not None:
        elapsed = timedelta(seconds=max(0.0, reading.monotonic_s - previous[1]))
    if reading.at >= newest.end:
        if elapsed is not None and previous is not None:
            measured = previous[0] + elapsed  # own: the pool's previous reading is where its newest entry ends
            stepped = reading.at - previous[3] > elapsed + STEP_TOLERANCE
            # a reading at the same instant as a previous one placed back (the tick's own scale-up): placed with it
            with_previous = elapsed < STEP_TOLERANCE and previous[3] - previous[0] > STEP_TOLERANCE
            if stepped or (with_previous and reading.at > measured):
                return Placed(replace(reading, at=measured), ahead=reading.at - measured)
        if elapsed is None or previous is None or not previous[2]:
            return Placed(reading)
        return Placed(reading, uncovered=min(elapsed, max(timedelta(0), elapsed - (reading.at - newest.end))))
    behind = newest.end - reading.at
    if not own:
        return Placed(reading, behind, quiet=True)
    if elapsed is None:
        return Placed(reading, behind)
    return Placed(replace(reading, at=newest.end + CATCH_UP_PIECE), behind, elapsed)


def accrued(newest: LedgerEntry | None, placed: Placed, gap_after: timedelta, grid: timedelta = GRID) -> Accrual:
    """The entries of ``placed``: behind the ledger and charged, the monotonic time at the units the pool held (the
    larger of them and the units read, past ``gap_after``, as for any gap) on a piece at the end of the newest
    entry, and the opening mark after it; otherwise what accrual derives, with the ``uncovered`` time added to the
    first interval's cost."""
    reading = placed.reading
    if placed.charged is not None and newest is not None:
        gap = placed.charged if placed.charged > gap_after else None
        held = newest.units if gap is None else max(newest.units, reading.units)
        piece = LedgerEntry(reading.pool_id, newest.end, reading.at, held, _cost(held, reading, placed.charged))
        return Accrual((piece, LedgerEntry(reading.pool_id, reading.at, reading.at, reading.units, 0.0)), gap)
    accrual = accrue(newest, reading, gap_after, grid)
    if not placed.uncovered or not accrual.entries or is_mark(first := accrual.entries[0]):
        return accrual
    more = replace(first, cost_usd=first.cost_usd + _cost(first.units, reading, placed.uncovered))
    return replace(accrual, entries=(more, *accrual.entries[1:]))


def _cost(units: int, reading: PoolReading, span: timedelta) -> float:
    return units * reading.price_per_unit_hour_usd * span.total_seconds() / 3600.0


def baseline(newest: LedgerEntry | None, placed: Placed) -> Baseline:
    """What the pool's next reading is measured from once ``placed`` is recorded: where it was recorded, or, for a
    reading behind that added nothing, the end of the pool's newest entry; with its monotonic time, and whether it
    was charged behind the ledger (the next reading, if it finds the wall clock caught up, is owed the wall time up
    to the entry's end)."""
    mono = placed.reading.monotonic_s
    if placed.behind is not None and placed.charged is None and newest is not None:
        return newest.end, mono, False, placed.read_at
    return placed.reading.at, mono, placed.charged is not None, placed.read_at


class ClockSteps:
    """How far behind (or ahead) each pool's readings were last told to be; tells a step once per pool."""

    def __init__(self) -> None:
        self._told: dict[str, timedelta] = {}
        self._told_ahead: dict[str, timedelta] = {}

    def tell(self, placed: Sequence[Placed]) -> None:
        """One warning for the pools of ``placed`` (in the order recorded) found behind, or further behind, than
        last told; a pool whose reading is no longer behind is forgotten. The same, apart, for the wall clock found
        ahead of the monotonic time since the pool's previous reading."""
        self._tell_ahead(placed)
        news: dict[str, Placed] = {}
        for p in placed:
            pool = p.reading.pool_id
            if p.quiet:
                continue
            if p.behind is None:
                self._told.pop(pool, None)
                news.pop(pool, None)
            elif pool not in self._told or p.behind > self._told[pool] + STEP_TOLERANCE:
                self._told[pool] = p.behind
                news[pool] = p
        if news:
            log.warning(
                "the wall clock stepped back behind the ledger (or behind another replica's; check the time sync): %s",
                "; ".join(_told(p) for _, p in sorted(news.items())),
                extra={
                    "pools": sorted(news),
                    "step_s": {k: p.step.total_seconds() for k, p in news.items() if p.step},
                },
            )

    def _tell_ahead(self, placed: Sequence[Placed]) -> None:
        news: dict[str, Placed] = {}
        for p in placed:
            pool = p.reading.pool_id
            if p.ahead is None:
                if not p.quiet and p.behind is None and p.reading.monotonic_s is not None:
                    self._told_ahead.pop(pool, None)
                    news.pop(pool, None)
            elif pool not in self._told_ahead or p.ahead > self._told_ahead[pool] + STEP_TOLERANCE:
                self._told_ahead[pool] = p.ahead
                news[pool] = p
        if news:
            log.warning(
                "the wall clock stepped forward (check the time sync): %s",
                "; ".join(_told_ahead(p) for _, p in sorted(news.items())),
                extra={
                    "pools": sorted(news),
                    "step_s": {k: p.ahead.total_seconds() for k, p in news.items() if p.ahead},
                },
            )


def _told_ahead(placed: Placed) -> str:
    reading = placed.reading
    return (
        f"pool {reading.pool_id} read at {(reading.at + (placed.ahead or timedelta(0))).isoformat()}, {placed.ahead} "
        "past its previous reading plus the time since it on the monotonic clock: charged that time only, recorded at "
        f"{reading.at.isoformat()}; if the next reading finds the wall clock kept this time, it is recorded where it "
        "is read and the step charged then"
    )


def _told(placed: Placed) -> str:
    reading = placed.reading
    if placed.charged is None:
        return (
            f"pool {reading.pool_id} read at {reading.at.isoformat()}, {placed.behind} before the end of its newest "
            "ledger entry: not charged, the reading has no monotonic time to measure the time since the previous one by"
        )
    return (
        f"pool {reading.pool_id} read {placed.behind} before the end of its newest ledger entry (a step back of "
        f"{placed.step}); charged the "
        f"{placed.charged} since its previous reading, measured on the monotonic clock, at the end of that entry "
        f"({(reading.at - CATCH_UP_PIECE).isoformat()}), which stays where it is: its readings are charged so until "
        f"the wall clock catches up with the ledger, in {placed.behind}"
    )
