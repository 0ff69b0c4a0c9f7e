"""The SQLite ledger across restarts: closed and reopened, or killed mid-write, then fed the same readings again,
it holds exactly what an uninterrupted run holds: nothing lost, nothing counted twice."""

from __future__ import annotations

import itertools
import os
import random
import signal
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent.ledger import InMemoryLedger
from agent.ledger.accrual import PoolReading
from agent.ledger.meter import SpendMeter
from agent.ledger.sqlite import SqliteLedger
from models import LedgerUnavailable

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2024, 3, 31, 23, 0, 7, 123456, tzinfo=UTC)
GAP = timedelta(minutes=5)
PRICES = {"gpu-a": 29.36, "tpu-b": 38.4}


def readings(count: int, seed: int = 7) -> list[PoolReading]:
    """A tick a minute for two pools, with resizes (the agent's own reading at the same instant) and gaps."""
    rng = random.Random(seed)
    units = {"gpu-a": 3, "tpu-b": 1}
    now = T0
    out: list[PoolReading] = []
    for _ in range(count):
        now += timedelta(minutes=rng.choice([1] * 12 + [9, 17]))
        for pool, price in PRICES.items():
            if rng.random() < 0.2:
                units[pool] = max(0, units[pool] + rng.randint(-3, 3))
            out.append(PoolReading(pool, now, units[pool], price))
            if rng.random() < 0.1:
                out.append(PoolReading(pool, now, units[pool] + rng.randint(1, 4), price))
    return out


def reference(feed: list[PoolReading]) -> InMemoryLedger:
    ledger = InMemoryLedger()
    SpendMeter(ledger, GAP).observe(feed)
    return ledger


def test_close_reopen_and_replay_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    feed = readings(300)
    path = tmp_path / "state" / "ledger.sqlite"
    with SqliteLedger(path) as first:
        SpendMeter(first, GAP).observe(feed[:250])
    with SqliteLedger(path) as second:
        SpendMeter(second, GAP).observe(feed[100:])  # replays 150 readings already recorded
        got = second.entries()
        end = feed[-1].at + timedelta(minutes=1)
        spent = {pool: second.spent([pool], T0, end) for pool in PRICES}
    want = reference(feed)
    assert got == want.entries()
    assert spent == pytest.approx({pool: want.spent([pool], T0, end) for pool in PRICES}, rel=1e-12)
    assert spent["gpu-a"] > 0.0
    assert spent["tpu-b"] > 0.0


def test_entries_tile_time_without_overlap_or_hole(tmp_path: Path) -> None:
    feed = readings(200, seed=3)
    with SqliteLedger(tmp_path / "ledger.sqlite") as ledger:
        SpendMeter(ledger, GAP).observe(feed)
        for pool in PRICES:
            real = [e for e in ledger.entries(pool) if e.end > e.start]
            assert real[0].start == feed[0].at
            assert all(a.end == b.start for a, b in itertools.pairwise(real))
            newest = ledger.last_entry(pool)
            assert newest is not None and newest.end == feed[-1].at


_WRITER = """
import sys
from datetime import timedelta
sys.path.insert(0, {root!r})
from tests.unit.test_ledger_sqlite import GAP, readings
from agent.ledger.meter import SpendMeter
from agent.ledger.sqlite import SqliteLedger
ledger = SqliteLedger(sys.argv[1])
meter = SpendMeter(ledger, GAP)
for i, reading in enumerate(readings(3000)):
    meter.observe([reading])
    if i == 200:
        print("ready", flush=True)
"""


def test_a_killed_writer_leaves_a_ledger_that_replay_completes(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    script = tmp_path / "writer.py"
    script.write_text(_WRITER.format(root=str(ROOT)))
    child = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        os.kill(child.pid, signal.SIGKILL)  # in the middle of writing: 2,800 readings are still to go
    finally:
        child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL
    feed = readings(3000)
    with SqliteLedger(path) as ledger:
        recorded = len(ledger.entries())
        SpendMeter(ledger, GAP).observe(feed)
        got = ledger.entries()
    assert 0 < recorded < len(got)
    assert got == reference(feed).entries()


def test_a_file_that_is_not_a_database_is_refused_with_a_fix(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    path.write_bytes(b"this is not a database, it is a text file with enough bytes to look like a header")
    with pytest.raises(LedgerUnavailable, match=r"not a usable leadtime ledger.*ledger\.path"):
        SqliteLedger(path)


def test_another_applications_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE accounts (id INTEGER)")
    db.close()
    with pytest.raises(LedgerUnavailable, match="another application"):
        SqliteLedger(path)


def test_an_unwritable_location_is_refused(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(LedgerUnavailable, match="cannot open the ledger file"):
        SqliteLedger(blocker / "ledger.sqlite")


def test_naive_times_are_refused(tmp_path: Path) -> None:
    with SqliteLedger(tmp_path / "ledger.sqlite") as ledger, pytest.raises(ValueError, match="tz-aware"):
        ledger.spent(["a"], datetime(2024, 1, 1), datetime(2024, 1, 2))
