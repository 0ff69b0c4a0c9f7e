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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from models import LedgerEntry

MINIMUM = timedelta(days=64)
DEFAULT = timedelta(days=400)  # 13 months and more: last year's same month is still whole
BATCH = 5_000
EVERY = timedelta(hours=1)


@dataclass
class Pruning:
    """When a ledger that keeps ``retention`` of history (``None``: all of it) removes older rows next."""

    retention: timedelta | None
    _done_until: datetime | None = None  # the cutoff up to which nothing older is left

    def __post_init__(self) -> None:
        if self.retention is not None and self.retention < MINIMUM:
            raise ValueError(f"a ledger retention must be at least {MINIMUM.days} days, got {self.retention}")

    def due(self, recorded: Sequence[LedgerEntry]) -> datetime | None:
        """The cutoff to remove rows ending at or before, after recording ``recorded``; ``None``: not now."""
        if self.retention is None or not recorded:
            return None
        cutoff = max(e.end for e in recorded) - self.retention
        if self._done_until is not None and cutoff < self._done_until + EVERY:
            return None
        return cutoff

    def removed(self, cutoff: datetime, rows: int) -> None:
        """``rows`` were removed up to ``cutoff``: fewer than a batch of each table means none older is left."""
        if rows < BATCH:
            self._done_until = cutoff
