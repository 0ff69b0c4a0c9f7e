"""The SQLite ledger file gives back the space retention frees: a new file is created with incremental auto-vacuum
and shrinks as old history is removed; a file created before is rebuilt once, when a pruning leaves a large share of
it free, and gives space back in steps from then on."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agent.ledger.accrual import GRID, PoolReading
from agent.ledger.meter import SpendMeter
from agent.ledger.retention import MINIMUM
from agent.ledger.sqlite import SqliteLedger
from agent.ledger.sqlite_space import INCREMENTAL
from models import LedgerEntry

NOW = datetime(2026, 3, 10, 12, 0, 7, tzinfo=UTC)
POOLS = [f"pool-{i:02d}" for i in range(6)]


def history(days: int) -> list[LedgerEntry]:
    """``days`` of 15-minute entries of each pool up to the cell NOW is in, as the meter leaves them."""
    first = datetime(1970, 1, 1, tzinfo=UTC) + ((NOW - datetime(1970, 1, 1, tzinfo=UTC)) // GRID) * GRID
    first -= timedelta(days=days)
    cells = days * 96
    return [LedgerEntry(p, first + i * GRID, first + (i + 1) * GRID, 4, 3.0) for p in POOLS for i in range(cells)]


def size(path: Path) -> int:
    """The bytes the ledger holds on disk: the file and its write-ahead log."""
    return sum(f.stat().st_size for f in (path, path.with_name(path.name + "-wal")) if f.exists())


def auto_vacuum(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("PRAGMA auto_vacuum").fetchone()[0])


def tick_until_pruned(ledger: SqliteLedger, ticks: int) -> None:
    meter = SpendMeter(ledger, timedelta(minutes=5))
    for minute in range(ticks):
        meter.observe([PoolReading(p, NOW + timedelta(minutes=minute), 4, 12.0) for p in POOLS])


def legacy_file(path: Path, days: int) -> None:
    """A ledger file as a release without auto-vacuum created it: holding ``days`` of history."""
    with SqliteLedger(path) as ledger:
        ledger.record_many(history(days))
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA auto_vacuum = 0")
        db.execute("VACUUM")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert auto_vacuum(path) == 0


def test_a_new_ledger_file_shrinks_as_retention_removes_old_history(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    with SqliteLedger(path) as ledger:
        ledger.record_many(history(MINIMUM.days + 36))
    grown = size(path)
    with SqliteLedger(path, retention=MINIMUM) as ledger:
        tick_until_pruned(ledger, 5)  # 36 days of 6 pools is 20,736 rows: 5 batches
        assert len(ledger.entries()) < len(history(MINIMUM.days + 1))  # all old history removed
        shrunk = size(path)
    assert shrunk < 0.8 * grown, (grown, shrunk)  # 36 of 100 days removed
    assert auto_vacuum(path) == INCREMENTAL  # as created, never rebuilt


def test_a_file_created_without_auto_vacuum_is_rebuilt_once_a_large_share_is_free(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    legacy_file(path, MINIMUM.days + 36)
    grown = size(path)
    with SqliteLedger(path, retention=MINIMUM) as ledger:
        tick_until_pruned(ledger, 5)
        assert size(path) < 0.8 * grown, (grown, size(path))
        assert auto_vacuum(path) == INCREMENTAL
        held = ledger.spent(POOLS, NOW - timedelta(days=30), NOW + timedelta(hours=1))
    with SqliteLedger(path) as reopened:  # the rebuilt file is the same ledger
        assert reopened.spent(POOLS, NOW - timedelta(days=30), NOW + timedelta(hours=1)) == held
        assert held > 30 * 96 * 3.0 * len(POOLS)


def test_a_file_created_without_auto_vacuum_is_not_rebuilt_for_a_small_share(tmp_path: Path) -> None:
    """A few days past the retention free a small share, which the rows that follow reuse: no rebuild."""
    path = tmp_path / "ledger.sqlite"
    legacy_file(path, MINIMUM.days + 4)
    with SqliteLedger(path, retention=MINIMUM) as ledger:
        tick_until_pruned(ledger, 2)
        assert len(ledger.entries()) < len(history(MINIMUM.days + 1))  # all old history removed
    assert auto_vacuum(path) == 0
