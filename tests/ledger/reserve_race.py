"""Two agents racing for one budget's last dollars, as two processes on one PostgreSQL ledger.

In each round both are released at the same moment for a budget of their own (``team-<round>``, a seeded random
cap) and each asks for a seeded random share above half of the cap, so at most one request can fit. The winner
records the spend (one entry of its pool) and then releases its reservation, as an agent does once the scale-up
is charged. Each writer prints ``won`` or ``lost`` per round.

    python -m tests.ledger.reserve_race URL ROLE ROUNDS   (password in LEADTIME_LEDGER_PASSWORD)
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agent.ledger.postgres import PostgresLedger
from agent.ledger.reservations import ReservationRequest
from models import LedgerEntry

ROOT = Path(__file__).resolve().parents[2]
PERIOD = (datetime(2024, 9, 1, tzinfo=UTC), datetime(2024, 10, 1, tzinfo=UTC))
NOW = datetime(2024, 9, 20, 12, 0, tzinfo=UTC)
PASSWORD_ENV = "LEADTIME_LEDGER_PASSWORD"


def cap(round_: int) -> float:
    return round(random.Random(round_).uniform(100.0, 10_000.0), 2)


def request(round_: int, role: int) -> ReservationRequest:
    share = random.Random(f"{round_}-{role}").uniform(0.5001, 0.99)
    return ReservationRequest(
        budget=f"team-{round_}",
        pools=(f"pool-{round_}-0", f"pool-{round_}-1"),
        period_start=PERIOD[0],
        period_end=PERIOD[1],
        cap_usd=cap(round_),
        amount_usd=round(cap(round_) * share, 2),
        holder=f"agent-{role}",
        ttl=timedelta(minutes=30),
    )


def agent(ledger: PostgresLedger, role: int, rounds: int) -> None:
    for round_ in range(rounds):
        if sys.stdin.readline().strip() != "go":
            raise SystemExit("not released")
        ask = request(round_, role)
        grant = ledger.reserve(ask, NOW)
        if grant.reservation_id is not None:
            start = NOW + timedelta(seconds=role)
            ledger.record(LedgerEntry(ask.pools[role], start, start + timedelta(hours=1), 1, ask.amount_usd))
            ledger.release([grant.reservation_id])
        print("won" if grant.granted else "lost", flush=True)


def race(url: str, password: str, rounds: int, timeout_s: float = 300.0) -> list[tuple[bool, bool]]:
    """Run both agents for ``rounds`` rounds; per round, whether agent 0 and agent 1 won."""
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.ledger.reserve_race", url, str(role), str(rounds)],
            cwd=ROOT,
            env={**os.environ, PASSWORD_ENV: password},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for role in (0, 1)
    ]
    outcomes: list[tuple[bool, bool]] = []
    try:
        for child in children:
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                raise RuntimeError(f"an agent did not start: {child.communicate(timeout=timeout_s)[1][-2000:]}")
        for _ in range(rounds):
            for child in children:
                assert child.stdin is not None
                child.stdin.write("go\n")
                child.stdin.flush()
            said = []
            for child in children:
                assert child.stdout is not None
                line = child.stdout.readline().strip()
                if line not in ("won", "lost"):
                    raise RuntimeError(f"an agent stopped: {child.communicate(timeout=timeout_s)[1][-2000:]}")
                said.append(line == "won")
            outcomes.append((said[0], said[1]))
        for child in children:
            child.communicate(timeout=timeout_s)
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait(timeout=10)
    return outcomes


def main(argv: Sequence[str]) -> None:
    url, role, rounds = argv
    ledger = PostgresLedger(url, os.environ[PASSWORD_ENV])
    print("ready", flush=True)
    agent(ledger, int(role), int(rounds))
    ledger.close()


if __name__ == "__main__":
    main(sys.argv[1:])
