"""One contract for every Ledger: the in-memory, SQLite and PostgreSQL ledgers pass the same tests (PostgreSQL on
a real server, a new database per test), budget reservations included."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent.ledger import InMemoryLedger, Ledger
from agent.ledger.postgres import PostgresLedger
from agent.ledger.reservations import ReservationRequest, Reservations
from agent.ledger.sqlite import SqliteLedger
from models import LedgerEntry
from tests.postgres.fixtures import POSTGRES, Database

T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgresql", marks=POSTGRES)])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ledger]:
    if request.param == "memory":
        yield InMemoryLedger()
        return
    if request.param == "postgresql":
        database: Database = request.getfixturevalue("postgres_database")
        with PostgresLedger(database.url, database.password) as postgres:
            yield postgres
        return
    sqlite = SqliteLedger(tmp_path / "ledger.sqlite")
    yield sqlite
    sqlite.close()


def entry(pool: str, start_min: int, end_min: int, units: int, cost: float) -> LedgerEntry:
    return LedgerEntry(pool, T0 + start_min * MIN, T0 + end_min * MIN, units, cost)


def test_recording_the_same_pool_and_start_twice_has_no_effect(ledger: Ledger) -> None:
    ledger.record(entry("a", 0, 1, 2, 1.5))
    ledger.record(entry("a", 0, 1, 2, 1.5))
    ledger.record(entry("a", 0, 2, 9, 99.0))  # same key, different content: the first wins
    assert ledger.spent(["a"], T0, T0 + 10 * MIN) == pytest.approx(1.5)


def test_spent_counts_entries_starting_in_the_range_for_the_named_pools(ledger: Ledger) -> None:
    ledger.record_many([entry("a", 0, 1, 1, 1.0), entry("a", 1, 2, 1, 2.0), entry("b", 1, 2, 1, 4.0)])
    assert ledger.spent(["a"], T0, T0 + 10 * MIN) == pytest.approx(3.0)
    assert ledger.spent(["a", "b"], T0 + MIN, T0 + 2 * MIN) == pytest.approx(6.0)
    assert ledger.spent(["a", "a"], T0 + MIN, T0 + 2 * MIN) == pytest.approx(2.0)
    assert ledger.spent(["c"], T0, T0 + 10 * MIN) == 0.0
    assert ledger.spent([], T0, T0 + 10 * MIN) == 0.0


def test_a_real_entry_replaces_a_mark_and_marks_keep_the_larger(ledger: Ledger) -> None:
    ledger.record(entry("a", 1, 1, 3, 0.0))
    ledger.record(entry("a", 1, 1, 5, 0.0))
    ledger.record(entry("a", 1, 1, 4, 0.0))
    assert ledger.last_entry("a") == entry("a", 1, 1, 5, 0.0)
    ledger.record(entry("a", 1, 2, 5, 7.0))
    ledger.record(entry("a", 1, 1, 9, 0.0))  # a mark after the real entry changes nothing
    assert ledger.last_entry("a") == entry("a", 1, 2, 5, 7.0)
    assert ledger.spent(["a"], T0, T0 + 10 * MIN) == pytest.approx(7.0)


def test_last_entry_is_the_newest_by_end_then_start(ledger: Ledger) -> None:
    assert ledger.last_entry("a") is None
    ledger.record_many([entry("a", 0, 1, 1, 1.0), entry("a", 1, 1, 2, 0.0)])
    assert ledger.last_entry("a") == entry("a", 1, 1, 2, 0.0)
    ledger.record(entry("a", 1, 3, 2, 1.0))
    assert ledger.last_entry("a") == entry("a", 1, 3, 2, 1.0)


def test_entries_recorded_out_of_order_add_up(ledger: Ledger) -> None:
    ledger.record_many([entry("a", 5, 6, 1, 5.0), entry("a", 0, 1, 1, 1.0), entry("a", 2, 3, 1, 2.0)])
    assert ledger.spent(["a"], T0, T0 + 3 * MIN) == pytest.approx(3.0)
    assert ledger.spent(["a"], T0 + 2 * MIN, T0 + 6 * MIN) == pytest.approx(7.0)
    newest = ledger.last_entry("a")
    assert newest is not None and newest.end == T0 + 6 * MIN


def test_update_reads_the_newest_entries_and_records_what_derive_makes(ledger: Ledger) -> None:
    ledger.record_many([entry("a", 0, 1, 1, 1.0), entry("a", 1, 1, 3, 0.0)])
    seen: list[dict[str, LedgerEntry | None]] = []

    def derive(newest: Mapping[str, LedgerEntry | None]) -> list[LedgerEntry]:
        seen.append(dict(newest))
        last = newest["a"]
        assert last is not None
        return [entry("a", 1, 2, last.units, 3.0), entry("a", 2, 2, 3, 0.0), entry("b", 2, 2, 1, 0.0)]

    ledger.update(["a", "b"], derive)
    assert seen == [{"a": entry("a", 1, 1, 3, 0.0), "b": None}]
    assert ledger.spent(["a", "b"], T0, T0 + 10 * MIN) == pytest.approx(4.0)
    assert ledger.last_entry("a") == entry("a", 2, 2, 3, 0.0)
    assert ledger.last_entry("b") == entry("b", 2, 2, 1, 0.0)


def test_a_failing_derive_leaves_the_ledger_usable(ledger: Ledger) -> None:
    def derive(newest: Mapping[str, LedgerEntry | None]) -> list[LedgerEntry]:
        raise ValueError("bad reading")

    ledger.record(entry("a", 0, 0, 1, 0.0))
    with pytest.raises(ValueError, match="bad reading"):
        ledger.update(["a"], derive)
    ledger.update(["a"], lambda newest: [entry("a", 0, 1, 1, 2.0)])
    assert ledger.spent(["a"], T0, T0 + 10 * MIN) == pytest.approx(2.0)


# -- budget reservations: one cluster's agent gets the same answers from every ledger ------------------------------
PERIOD = (T0, T0 + timedelta(days=30))


def ask(amount: float, budget: str = "research", ttl: timedelta = 10 * MIN) -> ReservationRequest:
    return ReservationRequest(budget, ("a", "b"), *PERIOD, 100.0, amount, "agent-a", ttl)


def reservations(ledger: Ledger) -> Reservations:
    assert isinstance(ledger, Reservations)
    return ledger


def test_a_reservation_is_granted_only_within_the_cap_over_recorded_and_reserved_spend(ledger: Ledger) -> None:
    ledger.record_many([entry("a", 0, 60, 2, 30.0), entry("other", 0, 60, 2, 500.0), entry("b", -60, -1, 2, 500.0)])
    book = reservations(ledger)
    first = book.reserve(ask(50.0), T0 + MIN)
    assert first.granted and first.headroom_usd == pytest.approx(70.0)
    refused = book.reserve(ask(20.01), T0 + MIN)
    assert not refused.granted and refused.headroom_usd == pytest.approx(20.0)
    assert book.reserve(ask(20.0), T0 + MIN).granted  # exactly to the cap
    assert book.reserved("research", T0 + MIN) == pytest.approx(70.0)
    assert first.reservation_id is not None
    book.release([first.reservation_id])
    assert book.reserved("research", T0 + MIN) == pytest.approx(20.0)


def test_requests_decided_together_see_the_grants_before_them_and_expire(ledger: Ledger) -> None:
    book = reservations(ledger)
    other = ReservationRequest("training", ("tpu",), *PERIOD, 10.0, 6.0, "agent-a", 10 * MIN)
    grants = book.reserve_many([ask(60.0, ttl=5 * MIN), other, ask(30.0), ask(20.0), other], T0)
    assert [g.granted for g in grants] == [True, True, True, False, False]
    assert [g.headroom_usd for g in grants] == pytest.approx([100.0, 10.0, 40.0, 10.0, 4.0])
    assert len({g.reservation_id for g in grants if g.granted}) == 3
    assert book.reserved("research", T0 + 4 * MIN) == pytest.approx(90.0)
    assert book.reserved("research", T0 + 5 * MIN) == pytest.approx(30.0)  # the first one expired
    assert book.reserve(ask(70.0), T0 + 5 * MIN).granted
