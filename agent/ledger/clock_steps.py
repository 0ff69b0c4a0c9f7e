"""Readings taken while the wall clock is behind the ledger: where accrual is to place them, and the warning.

A reading is stamped with the wall time, and accrual adds nothing for a reading older than the pool's newest entry
(which makes replays harmless). After the wall clock steps back (NTP, a VM resumed), every reading is older than
that entry until the wall clock has caught up, so the real time in between would go uncharged, silently. What
passed is measured instead on the monotonic clock (``PoolReading.monotonic_s``): a reading behind the pool's newest
entry is placed at that entry's end plus the monotonic time since the pool's previous reading, when that previous
reading is the one the entry ends at (another writer's entry, or one written before a restart, says nothing about
this process's monotonic clock). Such a reading is charged the units the pool held, as any reading is; the spend
is then recorded ahead of the wall clock by the step.

Without such a previous reading (another replica writing the same ledger is ahead, or the first reading after a
restart), the reading adds nothing, as before, says nothing (two replicas charging one ledger meet it at every tick
they collide), and becomes the point the next one is measured from: once that entry is still the newest at the next
reading, the clock is this process's, and that reading is charged. Without a monotonic time the reading adds nothing
either. A step is told once per pool, in one warning per write: when the pool's readings are first found behind
their own, and again if they fall further behind.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from agent.ledger.accrual import PoolReading
from models import LedgerEntry

log = logging.getLogger("agent.ledger.meter")

# How much further behind a pool's readings must fall to be told as another step: the wall and monotonic clocks
# drift apart by milliseconds a minute while NTP slews the wall clock.
STEP_TOLERANCE = timedelta(seconds=1)

Baseline = tuple[datetime, float | None]  # where a pool's last reading was recorded, its monotonic seconds then


@dataclass(frozen=True)
class Placed:
    """A reading as accrual is to take it: ``reading`` with its time moved to where the ledger has got to when the
    wall clock was ``behind`` the pool's newest entry, ``charged`` the monotonic time it adds there (``None``: it
    adds nothing, the time not known); ``ahead``: how far ahead of the wall clock it was moved (the step);
    ``quiet``: behind another writer's entry, or one recorded before this process: no step of its clock to tell."""

    reading: PoolReading
    behind: timedelta | None = None
    charged: timedelta | None = None
    ahead: timedelta | None = None
    quiet: bool = False

    @property
    def step(self) -> timedelta | None:
        """How far the wall clock is known to have stepped back: what the reading was moved ahead by, or, not
        charged, what it is behind by at least."""
        return self.ahead if self.ahead is not None else self.behind


def place(newest: LedgerEntry | None, reading: PoolReading, previous: Baseline | None) -> Placed:
    """Where ``reading`` goes, given the pool's newest entry and its previous reading (``previous``)."""
    if newest is None or reading.at >= newest.end:
        return Placed(reading)
    behind = newest.end - reading.at
    if previous is None or previous[0] != newest.end:
        return Placed(reading, behind, quiet=True)
    if reading.monotonic_s is None or previous[1] is None:
        return Placed(reading, behind)
    elapsed = timedelta(seconds=max(0.0, reading.monotonic_s - previous[1]))
    at = newest.end + elapsed
    return Placed(replace(reading, at=at), behind, elapsed, at - reading.at)


def baseline(newest: LedgerEntry | None, placed: Placed) -> Baseline:
    """What the pool's next reading is measured from once ``placed`` is recorded: where it was recorded, or, for a
    reading behind that added nothing, the end of the pool's newest entry; with its monotonic time."""
    mono = placed.reading.monotonic_s
    if placed.behind is not None and placed.charged is None and newest is not None:
        return newest.end, mono
    return placed.reading.at, mono


class ClockSteps:
    """How far behind each pool's readings were last told to be; tells a step once per pool."""

    def __init__(self) -> None:
        self._told: dict[str, timedelta] = {}

    def tell(self, placed: Sequence[Placed]) -> None:
        """One warning for the pools of ``placed`` (in the order recorded) found behind, or further behind, than
        last told; a pool whose reading is no longer behind is forgotten."""
        news: dict[str, Placed] = {}
        for p in placed:
            pool = p.reading.pool_id
            if p.quiet:
                continue
            if p.step is None:
                self._told.pop(pool, None)
                news.pop(pool, None)
            elif pool not in self._told or p.step > self._told[pool] + STEP_TOLERANCE:
                self._told[pool] = p.step
                news[pool] = p
        if news:
            log.warning(
                "the wall clock stepped back behind the ledger (or behind another replica's; check the time sync): %s",
                "; ".join(_told(p) for _, p in sorted(news.items())),
                extra={"pools": sorted(news), "step_s": {k: p.step.total_seconds() for k, p in news.items() if p.step}},
            )


def _told(placed: Placed) -> str:
    reading = placed.reading
    if placed.charged is None:
        return (
            f"pool {reading.pool_id} read at {reading.at.isoformat()}, {placed.behind} before the end of its newest "
            "ledger entry: not charged, the reading has no monotonic time to measure the time since the previous one by"
        )
    return (
        f"pool {reading.pool_id} read {placed.behind} before the end of its newest ledger entry; charged the "
        f"{placed.charged} since its previous reading, measured on the monotonic clock, up to "
        f"{reading.at.isoformat()}: its spend is recorded {placed.ahead} ahead of the wall clock from now on"
    )
