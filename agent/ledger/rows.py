"""How entries are stored by the database ledgers: times as integer microseconds since the Unix epoch (UTC), which
keeps keys exact and ordering trivial, and one row per entry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from models import LedgerEntry

COLUMNS = "pool_id, start_us, end_us, units, cost_usd"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_us(when: datetime) -> int:
    if when.tzinfo is None:
        raise ValueError(f"ledger times must be tz-aware, got {when.isoformat()}")
    return (when - _EPOCH) // timedelta(microseconds=1)


def from_us(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


def to_row(entry: LedgerEntry) -> tuple[str, int, int, int, float]:
    return (entry.pool_id, to_us(entry.start), to_us(entry.end), entry.units, entry.cost_usd)


def from_row(row: tuple[Any, ...]) -> LedgerEntry:
    pool_id, start, end, units, cost = row
    return LedgerEntry(str(pool_id), from_us(int(start)), from_us(int(end)), int(units), float(cost))
