"""Ledger backends compared: SQLite (a file) and PostgreSQL (a real server started for the run, on 127.0.0.1),
both in this process, on the daemon's per-tick work at fleet scale.

Per tick, in the daemon's order: charging one observation of 1,000 pools (``SpendMeter.observe``: one write
transaction that reads the pools' newest entries and records their entries), reading the spend of 100 budgets of
10 pools each for the period and the hour (``SpendMeter.budget_spend``), and reserving for 100 scale-ups (one per
budget) and releasing them, on both. Prints the median and the 90th percentile of each over the measured ticks, each
PostgreSQL figure's ratio to SQLite's, and recording plus reserving against the 50 ms target.
``--history`` records that many ticks of every pool first (one entry each), as later in a month: the work
that grows with the month's entries shows there.

    .venv/bin/python -m bench.bench_ledger [--pools 1000] [--budgets 100] [--ticks 30] [--history 0]

PostgreSQL runs with ``fsync`` off (the test server's settings): the figures compare the ledgers' own work, not
the disks. SQLite runs as configured for the daemon (WAL, ``synchronous = FULL``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

from agent.ledger.accrual import PoolReading
from agent.ledger.base import Ledger
from agent.ledger.meter import SpendMeter
from agent.ledger.postgres import PostgresLedger
from agent.ledger.reservations import ReservationRequest, Reservations
from agent.ledger.sqlite import SqliteLedger
from agent.planning.budget import Budget
from models import LedgerEntry
from tests.postgres.server import PostgresServer, find_bindir

T0 = datetime(2024, 3, 1, tzinfo=UTC)
TICK = timedelta(minutes=1)
TARGET_MS = 50.0


def budgets(pools: int, count: int) -> list[Budget]:
    per = max(1, pools // count)
    return [
        Budget(
            name=f"team-{b}", pools=frozenset(f"pool-{p}" for p in range(b * per, (b + 1) * per)), monthly_cap_usd=1e6
        )
        for b in range(count)
    ]


class BenchLedger(Ledger, Reservations, Protocol):
    """What the bench drives: the ledger the meter records to, with the reservations of its budgets."""


def seed(ledger: Ledger, pools: int, history: int, chunk: int = 20_000) -> None:
    """``history`` ticks of spend of every pool before the measured ones: the month so far."""
    entries = [
        LedgerEntry(f"pool-{p}", T0 + k * TICK, T0 + (k + 1) * TICK, 1 + (p + k) % 4, 0.05 * (1 + (p + k) % 4))
        for k in range(history)
        for p in range(pools)
    ]
    entries += [LedgerEntry(f"pool-{p}", T0 + history * TICK, T0 + history * TICK, 1, 0.0) for p in range(pools)]
    for at in range(0, len(entries), chunk):
        ledger.record_many(entries[at : at + chunk])


def run(
    ledger: BenchLedger, pools: int, count: int, ticks: int, warmup: int = 5, history: int = 0
) -> dict[str, list[float]]:
    """The ms of each part of each measured tick: recording it, reading the budgets' spend, and reserving for one
    scale-up per budget then releasing them all (in the order the daemon does them, so the reservations find
    the spend recorded before them, and the records the totals the reservations keep)."""
    if history:
        seed(ledger, pools, history)
    meter = SpendMeter(ledger, timedelta(minutes=5))
    caps = budgets(pools, count)
    period = (T0, T0 + timedelta(days=31))
    ms: dict[str, list[float]] = {"record": [], "read": [], "reserve": []}
    for tick in range(history, history + warmup + ticks):
        now = T0 + tick * TICK
        readings = [PoolReading(f"pool-{p}", now, 1 + (p + tick) % 4, 3.0) for p in range(pools)]
        asks = [
            ReservationRequest(b.name, tuple(sorted(b.pools)), *period, 1e6, 25.0, "bench", timedelta(minutes=10))
            for b in caps
        ]
        started = time.perf_counter()
        meter.observe(readings)
        recorded = time.perf_counter()
        meter.budget_spend(caps, now)
        read = time.perf_counter()
        grants = ledger.reserve_many(asks, now)
        ledger.release([g.reservation_id for g in grants if g.reservation_id is not None])
        done = time.perf_counter()
        if tick >= history + warmup:
            for part, (begun, ended) in (
                ("record", (started, recorded)),
                ("read", (recorded, read)),
                ("reserve", (read, done)),
            ):
                ms[part].append((ended - begun) * 1e3)
    return ms


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", type=int, default=1000)
    parser.add_argument("--budgets", type=int, default=100)
    parser.add_argument("--ticks", type=int, default=30)
    parser.add_argument(
        "--history", type=int, default=0, help="ticks of spend recorded before the measured ones (the month so far)"
    )
    args = parser.parse_args()
    bindir = find_bindir()
    if bindir is None:
        raise SystemExit("PostgreSQL server binaries not found: install the Debian package postgresql")
    server = PostgresServer(bindir)
    server.start()
    try:
        results: dict[str, dict[str, list[float]]] = {}
        with tempfile.TemporaryDirectory() as work, SqliteLedger(Path(work) / "ledger.sqlite") as sqlite:
            results["sqlite"] = run(sqlite, args.pools, args.budgets, args.ticks, history=args.history)
        with PostgresLedger(server.new_database(), server.password) as postgres:
            results["postgresql"] = run(postgres, args.pools, args.budgets, args.ticks, history=args.history)
    finally:
        server.stop()
    print(
        f"{args.pools} pools, {args.budgets} budgets, {args.ticks} ticks after {args.history} of history"
        " (median / p90, ms)"
    )
    stat: Callable[[list[float]], str] = lambda v: f"{statistics.median(v):7.1f} / {p90(v):7.1f}"  # noqa: E731
    for name, ms in results.items():
        total = [a + b for a, b in zip(ms["record"], ms["read"], strict=True)]
        print(f"  {name:10s} record tick {stat(ms['record'])}   budget spend {stat(ms['read'])}   total {stat(total)}")
    for name, ms in results.items():
        print(f"  {name:10s} reserve and release for {args.budgets} scale-ups {stat(ms['reserve'])}")
    median = {name: {part: statistics.median(v) for part, v in ms.items()} for name, ms in results.items()}
    s, p = median["sqlite"], median["postgresql"]
    target = p["record"] + p["reserve"]
    print(
        f"  postgresql / sqlite: record {p['record'] / s['record']:.2f}x, budget spend {p['read'] / s['read']:.2f}x, "
        f"reserve {p['reserve'] / s['reserve']:.2f}x, record + reserve {target / (s['record'] + s['reserve']):.2f}x; "
        f"postgresql record + reserve {target:.1f} ms against the {TARGET_MS:.0f} ms target ({target / TARGET_MS:.2f}x)"
    )


if __name__ == "__main__":
    main()
