"""Budget reservations on the PostgreSQL ledger: granted only within the cap against recorded and reserved spend,
released, expiring; and two agents racing for the last dollars of 200 budgets never both get them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agent.ledger import InMemoryLedger
from agent.ledger.postgres import PostgresLedger
from agent.ledger.reservations import ReservationRequest
from models import LedgerEntry
from tests.ledger.reserve_race import NOW, PERIOD, cap, race, request
from tests.postgres.fixtures import POSTGRES, Database

pytestmark = POSTGRES
# Both agents are released together in every round: with the writer lock taken only after the reservations are read,
# both won in about nine rounds of ten, so 200 rounds are far more than a race needs to show.
ROUNDS = 200


def ask(amount: float, cap_usd: float = 100.0, ttl: timedelta = timedelta(minutes=10)) -> ReservationRequest:
    return ReservationRequest("research", ("a100", "h100"), *PERIOD, cap_usd, amount, "agent-a", ttl)


def test_a_reservation_counts_recorded_and_reserved_spend_against_the_cap(postgres_database: Database) -> None:
    with PostgresLedger(postgres_database.url, postgres_database.password) as ledger:
        ledger.record(LedgerEntry("a100", PERIOD[0], PERIOD[0] + timedelta(hours=1), 2, 30.0))
        ledger.record(LedgerEntry("other", PERIOD[0], PERIOD[0] + timedelta(hours=1), 2, 500.0))  # not the budget's
        ledger.record(LedgerEntry("h100", PERIOD[0] - timedelta(hours=1), PERIOD[0], 2, 500.0))  # the period before
        first = ledger.reserve(ask(50.0), NOW)
        assert first.granted and first.headroom_usd == pytest.approx(70.0)
        refused = ledger.reserve(ask(20.01), NOW)
        assert not refused.granted and refused.headroom_usd == pytest.approx(20.0)
        assert ledger.reserved("research", NOW) == pytest.approx(50.0)
        assert ledger.reserve(ask(20.0), NOW).granted  # exactly to the cap
        assert first.reservation_id is not None
        ledger.release([first.reservation_id])
        assert ledger.reserved("research", NOW) == pytest.approx(20.0)
        assert ledger.reserve(ask(50.0), NOW).granted


def test_requests_decided_together_each_see_the_grants_before_them(postgres_database: Database) -> None:
    other = ReservationRequest("training", ("tpu",), *PERIOD, 10.0, 6.0, "agent-a", timedelta(minutes=10))
    with PostgresLedger(postgres_database.url, postgres_database.password) as ledger:
        grants = ledger.reserve_many([ask(60.0), other, ask(30.0), ask(20.0), other], NOW)
        assert [g.granted for g in grants] == [True, True, True, False, False]
        assert [g.headroom_usd for g in grants] == pytest.approx([100.0, 10.0, 40.0, 10.0, 4.0])
        assert ledger.reserved("research", NOW) == pytest.approx(90.0)
        ids = [g.reservation_id for g in grants if g.reservation_id is not None]
        assert len(set(ids)) == 3
        ledger.release(ids[:1])  # the first request's reservation: 60 USD of research
        assert ledger.reserved("research", NOW) == pytest.approx(30.0)
        assert ledger.reserved("training", NOW) == pytest.approx(6.0)


@pytest.mark.parametrize("backend", ["postgresql", "memory"])
def test_reservations_replaced_in_the_same_transaction_free_their_room_for_the_requests(
    postgres_database: Database, backend: str
) -> None:
    ledger: PostgresLedger | InMemoryLedger = (
        PostgresLedger(postgres_database.url, postgres_database.password)
        if backend == "postgresql"
        else InMemoryLedger()
    )
    try:
        held = ledger.reserve(ask(70.0), NOW)
        assert held.reservation_id is not None
        assert not ledger.reserve(ask(80.0), NOW).granted
        (grant,) = ledger.reserve_many([ask(80.0)], NOW, replacing=[held.reservation_id])
        assert grant.granted and grant.headroom_usd == pytest.approx(100.0)
        assert ledger.reserved("research", NOW) == pytest.approx(80.0)
        assert grant.reservation_id is not None
        assert ledger.reserve_many([], NOW, replacing=[grant.reservation_id]) == []  # nothing asked: only released
        assert ledger.reserved("research", NOW) == 0.0
    finally:
        if isinstance(ledger, PostgresLedger):
            ledger.close()


def test_a_reservation_of_an_agent_that_died_expires(postgres_database: Database) -> None:
    with PostgresLedger(postgres_database.url, postgres_database.password) as ledger:
        assert ledger.reserve(ask(80.0, ttl=timedelta(minutes=5)), NOW).granted
        assert not ledger.reserve(ask(80.0), NOW + timedelta(minutes=4)).granted
        assert ledger.reserved("research", NOW + timedelta(minutes=5)) == 0.0
        assert ledger.reserve(ask(80.0), NOW + timedelta(minutes=5)).granted


def test_bad_requests_are_refused_naming_the_budget() -> None:
    with pytest.raises(ValueError, match=r"'research'.*non-negative"):
        ask(-1.0)
    with pytest.raises(ValueError, match=r"'research'.*positive time to live"):
        ask(1.0, ttl=timedelta(0))


def test_two_agents_racing_for_the_last_dollars_never_both_get_them(postgres_database: Database) -> None:
    outcomes = race(postgres_database.url, postgres_database.password, ROUNDS)
    assert len(outcomes) == ROUNDS
    assert [r for r, (a, b) in enumerate(outcomes) if a == b] == []  # exactly one winner in every round
    with PostgresLedger(postgres_database.url, postgres_database.password) as ledger:
        for round_, won in enumerate(outcomes):
            winner = request(round_, 0 if won[0] else 1)
            spent = ledger.spent(list(winner.pools), *PERIOD)
            assert spent == pytest.approx(winner.amount_usd)  # charged once, nothing lost
            assert spent + ledger.reserved(winner.budget, NOW) <= cap(round_)
            assert ledger.reserved(winner.budget, NOW) == 0.0  # released once charged
