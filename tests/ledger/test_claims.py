"""A claim reads what the other agents hold and writes its own in one transaction under the writer lock.

Two agents marking the units they release (``team/releasing``), each on its own connection to one real PostgreSQL
ledger: read, then written in two steps, both read nothing before either wrote (the double shed of agents ticking at
the same instant); claimed, the second waits for the first's transaction and reads its mark. A reader takes no lock:
it answers while a claim holds it. The in-process ledger decides a claim under its lock the same way."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from datetime import timedelta

import pytest

from agent.ledger import InMemoryLedger
from agent.ledger.postgres import PostgresLedger
from agent.ledger.reservations import Claims, Grant, OthersRead, ReservationRequest, Reservations
from tests.ledger.reserve_race import NOW, PERIOD
from tests.postgres.fixtures import POSTGRES, Database

pytestmark = POSTGRES

KEY = "team/releasing"
WAIT_S = 0.5  # how long the second claim is watched waiting for the first's lock


def _mark(holder: str, usd: float) -> ReservationRequest:
    return ReservationRequest(
        KEY, ("west", "east"), PERIOD[0], PERIOD[1], math.inf, usd, holder, timedelta(minutes=10)
    )  # fmt: skip


def _others(holder: str) -> OthersRead:
    return OthersRead((KEY,), holder)


@contextmanager
def _two(database: Database | None) -> Iterator[tuple[Reservations, Reservations]]:
    if database is None:
        ledger = InMemoryLedger()
        yield ledger, ledger
        return
    west = PostgresLedger(database.url, database.password)
    east = PostgresLedger(database.url, database.password)
    try:
        yield west, east
    finally:
        west.close()
        east.close()


def _sheds(seen: Sequence[float], holder: str, needed_usd: float = 30.0) -> list[ReservationRequest]:
    """What an agent marks once it read ``seen`` of the others' marks: the excess they leave, if any."""
    left = needed_usd - seen[0]
    return [_mark(holder, left)] if left > 0.0 else []


def test_read_then_written_both_agents_read_before_either_writes(postgres_database: Database) -> None:
    """The two steps the marks were written in: both read 0 USD marked and both mark the whole excess."""
    with _two(postgres_database) as (west, east):
        seen = [ledger.reserved_by_others([KEY], NOW, name) for ledger, name in ((west, "west"), (east, "east"))]
        for ledger, name, read in ((west, "west", seen[0]), (east, "east", seen[1])):
            ledger.reserve_many(_sheds([read], name), NOW)
        assert seen == [0.0, 0.0]
        assert west.reserved(KEY, NOW) == pytest.approx(60.0)  # 30 USD of excess marked twice


@pytest.mark.parametrize("backend", ["postgresql", "memory"])
def test_a_claim_at_the_same_instant_reads_the_first_claims_mark(request: pytest.FixtureRequest, backend: str) -> None:
    """East claims while west's claim holds the lock (west has read, not yet written): east waits, a reader does
    not, and east reads west's mark and marks nothing more."""
    database: Database | None = request.getfixturevalue("postgres_database") if backend == "postgresql" else None
    with _two(database) as (west, east), ThreadPoolExecutor(1) as pool:
        assert isinstance(west, Claims) and isinstance(east, Claims)
        east_claim: list[Future[tuple[list[float], list[Grant]]]] = []
        in_lock = threading.Event()
        reader: list[float] = []

        def west_chooses(seen: Sequence[float]) -> list[ReservationRequest]:
            if not east_claim:  # west holds the lock: east claims now, and waits
                in_lock.set()
                east_claim.append(pool.submit(east.claim, [_others("east")], lambda s: _sheds(s, "east"), NOW))
                if database is not None:  # a third session reads while the lock is held (a book reads under it)
                    with PostgresLedger(database.url, database.password) as third:
                        reader.append(third.reserved_by_others([KEY], NOW, "east"))
                with pytest.raises(TimeoutError):  # east waits for west's transaction
                    east_claim[0].result(timeout=WAIT_S)
            return _sheds(seen, "west")

        west_seen, west_grants = west.claim([_others("west")], west_chooses, NOW)
        east_seen, east_grants = east_claim[0].result(timeout=30)

        assert in_lock.is_set()
        assert west_seen == [0.0] and len(west_grants) == 1
        assert east_seen == [pytest.approx(30.0)] and east_grants == []  # west's mark read: nothing left to shed
        assert west.reserved(KEY, NOW) == pytest.approx(30.0)
        assert reader == ([0.0] if database is not None else [])  # not waiting; west's mark not committed yet
