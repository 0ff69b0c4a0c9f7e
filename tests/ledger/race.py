"""Two writers on one ledger, as two processes: each observes the same pools on its own schedule (one on the
minute, the other on the half minute), and both are released for each tick at the same moment (as two replicas
ticking on one schedule are), so their reads and writes collide on every tick.

The pools hold a constant capacity, so every instant between the first and the last charged instant must be
charged exactly once: a hole (an interval nobody charged) is spend lost, an overlap is spend counted twice.
``measure`` reads the ledger back and reports both against what the span should have cost.

Run one writer as ``python -m tests.ledger.race BACKEND TARGET ROLE TICKS POOLS`` (BACKEND ``sqlite`` with a
file, or ``postgresql`` with a URL, the password in ``LEADTIME_LEDGER_PASSWORD``); ``run_two_writers`` starts two
and releases them together.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agent.ledger.accrual import PoolReading
from agent.ledger.base import Ledger
from agent.ledger.meter import SpendMeter
from models import LedgerEntry

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2024, 5, 31, 22, 0, tzinfo=UTC)
HALF_MINUTE = timedelta(seconds=30)
UNITS, PRICE = 4, 10.0  # 40 USD an hour per pool
GAP_AFTER = timedelta(hours=1)
PASSWORD_ENV = "LEADTIME_LEDGER_PASSWORD"


def pools(count: int) -> list[str]:
    return [f"pool-{i}" for i in range(count)]


def writer(ledger: Ledger, role: int, ticks: int, pool_count: int, release: Callable[[], None]) -> None:
    """Observe every pool once per tick, each tick when ``release`` returns: role 0 at whole minutes, role 1 at
    half minutes."""
    meter = SpendMeter(ledger, GAP_AFTER)
    names = pools(pool_count)
    for tick in range(ticks):
        release()
        at = T0 + (2 * tick + role) * HALF_MINUTE
        meter.observe([PoolReading(name, at, UNITS, PRICE) for name in names])


@dataclass(frozen=True)
class Outcome:
    expected_usd: float
    charged_usd: float
    holes: int
    overlaps: int
    uncharged_usd: float  # spend of the holes
    double_charged_usd: float  # spend of the overlaps

    @property
    def under_charged_pct(self) -> float:
        return 100.0 * self.uncharged_usd / self.expected_usd

    @property
    def double_charged_pct(self) -> float:
        return 100.0 * self.double_charged_usd / self.expected_usd

    def __str__(self) -> str:
        return (
            f"expected {self.expected_usd:.2f} USD, charged {self.charged_usd:.2f} USD: {self.holes} holes "
            f"({self.under_charged_pct:.3f}% under-charged), {self.overlaps} overlaps "
            f"({self.double_charged_pct:.3f}% charged twice)"
        )


def measure(entries_of: Callable[[str], Sequence[LedgerEntry]], pool_count: int) -> Outcome:
    expected = charged = uncharged = doubled = 0.0
    holes = overlaps = 0
    hourly = UNITS * PRICE / 3600.0
    for name in pools(pool_count):
        real = sorted((e for e in entries_of(name) if e.end > e.start), key=lambda e: e.start)
        if not real:
            continue
        span = max(e.end for e in real) - real[0].start
        expected += hourly * span.total_seconds()
        charged += sum(e.cost_usd for e in real)
        covered = real[0].end
        for entry in real[1:]:
            if entry.start > covered:
                holes += 1
                uncharged += hourly * (entry.start - covered).total_seconds()
            elif entry.start < covered:
                overlaps += 1
                doubled += hourly * (min(covered, entry.end) - entry.start).total_seconds()
            covered = max(covered, entry.end)
    return Outcome(expected, charged, holes, overlaps, uncharged, doubled)


def run_two_writers(
    backend: str, target: str, ticks: int, pool_count: int, password: str | None = None, timeout_s: float = 120.0
) -> None:
    """Start both writers, let each open its ledger, then release both for each tick once both finished the
    previous one; fail if either fails."""
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.ledger.race", backend, target, str(role), str(ticks), str(pool_count)],
            cwd=ROOT,
            env={**os.environ, PASSWORD_ENV: password or ""},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for role in (0, 1)
    ]
    try:
        for child in children:
            assert child.stdout is not None
            line = child.stdout.readline().strip()
            if line != "ready":
                raise RuntimeError(f"a writer did not start: {line} {child.communicate(timeout=timeout_s)[1]}")
        for _ in range(ticks):
            for child in children:
                assert child.stdin is not None
                child.stdin.write("go\n")
                child.stdin.flush()
            for child in children:
                assert child.stdout is not None
                if child.stdout.readline().strip() != "done":
                    raise RuntimeError(f"a writer stopped: {child.communicate(timeout=timeout_s)[1][-2000:]}")
        for child in children:
            _, err = child.communicate(timeout=timeout_s)
            if child.returncode != 0:
                raise RuntimeError(f"a writer failed (exit {child.returncode}): {err[-2000:]}")
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait(timeout=10)


def open_writer_ledger(backend: str, target: str) -> Ledger:
    if backend == "sqlite":
        from agent.ledger.sqlite import SqliteLedger

        return SqliteLedger(target, exclusive=False)
    if backend == "postgresql":
        from agent.ledger.postgres import PostgresLedger

        return PostgresLedger(target, os.environ[PASSWORD_ENV])
    raise SystemExit(f"unknown backend {backend!r}")


def main(argv: Sequence[str]) -> None:
    backend, target, role, ticks, pool_count = argv
    ledger = open_writer_ledger(backend, target)
    print("ready", flush=True)
    ticked = False

    def release() -> None:
        nonlocal ticked
        if ticked:
            print("done", flush=True)
        ticked = True
        if sys.stdin.readline().strip() != "go":
            raise SystemExit("not released")

    writer(ledger, int(role), int(ticks), int(pool_count), release)
    print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
