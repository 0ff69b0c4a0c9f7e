"""Accrual: turning successive observations of a pool into ledger entries, with gaps charged conservatively.

Pure: no clock, no storage. The ledger's newest entry for a pool is the only state accrual needs, so the same
readings give the same entries whether or not the process restarted between them.

How spend accrues:

- A reading (pool, time, billed units, price) closes the interval since the pool's last entry and opens the next.
- The open interval is persisted as an *opening mark*: a zero-length entry ``[at, at)`` carrying the units held
  from ``at`` on, at no cost. It records where accrual resumes after a restart and with what capacity. A real
  entry from the same start replaces the mark; two marks at the same instant keep the larger capacity (the
  observation, then the agent's own scale-up right after it).
- A closed interval is charged the capacity of its opening mark: the last known capacity ran until the next
  observation. An interval longer than ``gap_after`` is a gap nobody watched, and is charged the larger of the
  capacities on either side of it, since the pool may have grown at any moment inside it.
- Intervals are split on a fixed UTC grid (15 minutes by default), so every local hour and month boundary in
  any time zone starts an entry and period totals are exact.
- A reading older than the pool's last entry adds nothing, which makes replays after a restart harmless. Where the
  wall clock stepped back, the meter charges such a reading the monotonic time since the pool's previous one onto
  the end of the pool's newest entry without moving that end (``agent.ledger.clock_steps``), so the time until the
  wall clock catches up is charged all the same and the ledger never runs ahead of the wall clock. Where it stepped
  forward, the meter moves the reading back to the pool's previous reading plus the monotonic time since it, so the
  step is not charged as a gap and the ledger does not run ahead of the real time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from models import LedgerEntry

GRID = timedelta(minutes=15)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class PoolReading:
    """Units billed in a pool at ``at`` (ready and provisioning units both bill) and the unit price then;
    ``monotonic_s``: the seconds on the reader's monotonic clock at the same instant (``None``: not known, a replay),
    which measures the time since the pool's previous reading when the wall clock stepped back or forward."""

    pool_id: str
    at: datetime
    units: int
    price_per_unit_hour_usd: float
    monotonic_s: float | None = None


@dataclass(frozen=True)
class Accrual:
    """Entries to record for one reading, and the length of the unwatched gap it closed, if any."""

    entries: tuple[LedgerEntry, ...]
    gap: timedelta | None = None

    @property
    def cost_usd(self) -> float:
        return sum(e.cost_usd for e in self.entries)


def is_mark(entry: LedgerEntry) -> bool:
    """An opening mark: where accrual resumes and with what capacity; it costs nothing."""
    return entry.start == entry.end


def accrue(last: LedgerEntry | None, reading: PoolReading, gap_after: timedelta, grid: timedelta = GRID) -> Accrual:
    """Entries for ``reading`` given the pool's newest recorded entry (``None``: the pool was never seen)."""
    _check(reading, grid)
    mark = LedgerEntry(reading.pool_id, reading.at, reading.at, reading.units, 0.0)
    if last is None:
        return Accrual((mark,))
    if last.pool_id != reading.pool_id:
        raise ValueError(f"entry of pool {last.pool_id!r} passed for a reading of pool {reading.pool_id!r}")
    since = last.end
    if reading.at < since:
        return Accrual(())
    if reading.at == since:
        return Accrual((mark,))
    held = last.units
    gap: timedelta | None = None
    if reading.at - since > gap_after:
        gap = reading.at - since
        held = max(held, reading.units)
    entries = [
        LedgerEntry(reading.pool_id, start, end, held, _cost(held, reading.price_per_unit_hour_usd, end - start))
        for start, end in split(since, reading.at, grid)
    ]
    entries.append(mark)
    return Accrual(tuple(entries), gap)


def resolve(existing: LedgerEntry | None, incoming: LedgerEntry) -> LedgerEntry | None:
    """What a ledger stores when ``incoming`` arrives for a (pool, start) that may already hold ``existing``.

    Returns the entry to store, or ``None`` to keep what is there. The first real entry wins (recording the same
    interval twice has no effect); a real entry replaces a mark; marks at the same instant keep the larger
    capacity. The result does not depend on the order entries arrive in, which makes replays safe.
    """
    if existing is None:
        return incoming
    if not is_mark(existing):
        return None
    if not is_mark(incoming):
        return incoming
    return incoming if incoming.units > existing.units else None


def split(start: datetime, end: datetime, grid: timedelta = GRID) -> list[tuple[datetime, datetime]]:
    """``[start, end)`` cut at every multiple of ``grid`` since the Unix epoch (UTC)."""
    pieces: list[tuple[datetime, datetime]] = []
    cursor = start
    boundary = _EPOCH + ((start - _EPOCH) // grid + 1) * grid
    while boundary < end:
        pieces.append((cursor, boundary))
        cursor = boundary
        boundary += grid
    if cursor < end:
        pieces.append((cursor, end))
    return pieces


def _cost(units: int, price_per_unit_hour_usd: float, span: timedelta) -> float:
    return units * price_per_unit_hour_usd * span.total_seconds() / 3600.0


def _check(reading: PoolReading, grid: timedelta) -> None:
    if reading.at.tzinfo is None:
        raise ValueError(f"reading of pool {reading.pool_id!r} has a naive time; use tz-aware UTC")
    if reading.units < 0:
        raise ValueError(f"reading of pool {reading.pool_id!r} has negative units ({reading.units})")
    if reading.price_per_unit_hour_usd < 0:
        raise ValueError(f"reading of pool {reading.pool_id!r} has a negative price")
    if grid <= timedelta(0):
        raise ValueError("the accrual grid must be a positive duration")
