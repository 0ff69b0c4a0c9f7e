"""A mark of units being released counts only against the reservation it marks. An agent marks the units it is
releasing for two of its ticks, and keeps its units reserved for ``ledger.reservation_ttl``, which may be shorter (at
least 1 minute, with 5-minute ticks): once its reservation has lapsed, its mark still names units that nobody counts
as staying any more. A shed takes out of the other agents' reservations no more than they hold (the units the agent
holds itself are not shed by another's mark), and a hard stop counts the other agents' units kept as what they
reserve less what they mark, never below nothing: a mark taken beyond its reservation would free money the cap does
not have, and the agent would shed or evict less than its own units need.

The shed is the planner's (pure); the hard stop's count of the other agents' units is read from two agents'
reservers on one real PostgreSQL ledger."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from agent.budget_reserve import BudgetReserver
from agent.budget_reserve_caps import Releasing
from agent.ledger.postgres import PostgresLedger
from agent.planning.budget import Budget, BudgetSpend
from agent.planning.enforcement import enforce_budgets
from tests import shared_budget_rig as rig
from tests.postgres.fixtures import POSTGRES, Database
from tests.unit.test_budget_enforcement import spec

# -- the shed: the planner's, on one pool of this agent --------------------------------------------------------------

NOW = datetime(2024, 3, 31, 14, 0, tzinfo=UTC)  # 10 hours before the month ends (UTC)
TICK = timedelta(minutes=1)
POOLS = {"spot": spec("spot", 10.0)}  # 10 USD a unit-hour: a unit idle for the window saves 99.83 USD if released
BUDGET = Budget("team", frozenset({"spot", "remote"}), monthly_cap_usd=1000.0, remote_pools=frozenset({"remote"}))
# 700 USD recorded and spot's own 4 units to the month's end (400 USD): 100 USD over on its own, 2 units' worth
OWN_OVER = BudgetSpend(BUDGET, NOW, 700.0, 0.0)


@pytest.mark.parametrize(
    ("reserved_elsewhere", "marked_elsewhere", "shed"),
    [
        (0.0, 0.0, 2),
        (300.0, 300.0, 2),  # all the other agent's units are going: the excess is spot's own
        (300.0, 600.0, 2),  # a mark beyond its reservation takes none of spot's own units off
        (0.0, 300.0, 2),  # the other agent's reservation lapsed before its mark
    ],
)
def test_a_shed_takes_a_mark_off_the_other_agents_reservation_only(
    reserved_elsewhere: float, marked_elsewhere: float, shed: int
) -> None:
    spend = replace(OWN_OVER, committed_elsewhere_usd=reserved_elsewhere, releasing_elsewhere_usd=marked_elsewhere)

    out = enforce_budgets(NOW, [spend], POOLS, {"spot": 4}, {"spot": 4}, {"spot": 2}, TICK)

    assert [(s.pool_id, s.units, s.idle_units) for s in out.shed] == [("spot", shed, shed)]


def test_a_shed_counts_a_mark_within_its_reservation_as_shed_already() -> None:
    """Under the cap on its own (500 USD of 1,000), 250 USD over with the other agent's 750 reserved, 50 over once
    200 of them are marked as going: 1 unit where 3 were needed; all 750 marked, nothing."""
    alone = BudgetSpend(BUDGET, NOW, 100.0, 0.0, committed_elsewhere_usd=750.0)

    def shed(marked: float) -> int:
        spend = replace(alone, releasing_elsewhere_usd=marked)
        out = enforce_budgets(NOW, [spend], POOLS, {"spot": 4}, {"spot": 4}, {"spot": 4}, TICK)
        return sum(s.units for s in out.shed)

    assert (shed(0.0), shed(200.0), shed(750.0), shed(900.0)) == (3, 1, 0, 0)


# -- the hard stop: what the other agents' units kept cost, from their reservations and marks ----------------------

PG_START = datetime(2024, 1, 15, 12, tzinfo=UTC)
PG_TICK = timedelta(minutes=5)
UNIT_HOUR_USD = rig.UNIT_HOUR_USD
SHARED = {"west": spec("west", UNIT_HOUR_USD), "east": spec("east", UNIT_HOUR_USD)}


def _reserver(ledger: PostgresLedger, own: str, other: str, ttl: timedelta) -> BudgetReserver:
    team = Budget(
        "team",
        frozenset({own, other}),
        monthly_cap_usd=1e6,
        commit_horizon=timedelta(hours=24),
        remote_pools=frozenset({other}),
    )
    return BudgetReserver(ledger, [team], {own: SHARED[own]}, f"cluster-{own}", ttl, tick=PG_TICK)


# east's units, over the stop's two ticks from east's last tick (12:00 to 12:15), less its 3 marked units from the
# tick after (12:05: a release bills until then)
KEPT_USD = (8 * 15 - 3 * 10) / 60 * UNIT_HOUR_USD


@pytest.mark.parametrize(
    ("east_ttl", "staying_usd"),
    [
        (timedelta(hours=1), KEPT_USD),  # 5 units kept, and the 3 going until 12:05
        (timedelta(minutes=1), 0.0),  # east's reservation lapsed at 12:01, its mark lives to 12:10: none kept
    ],
)
@POSTGRES
def test_a_hard_stop_counts_the_other_agents_units_kept_never_below_none(
    postgres_database: Database, east_ttl: timedelta, staying_usd: float
) -> None:
    west_ledger = PostgresLedger(postgres_database.url, postgres_database.password)
    east_ledger = PostgresLedger(postgres_database.url, postgres_database.password)
    try:
        west = _reserver(west_ledger, "west", "east", timedelta(hours=1))
        east = _reserver(east_ledger, "east", "west", east_ttl)
        east.commit(PG_START, {"east": 8}, releasing=Releasing({"east": 3}))

        staying = west.staying_elsewhere(PG_START + PG_TICK, 2 * PG_TICK)
    finally:
        west_ledger.close()
        east_ledger.close()

    assert staying["team"] == pytest.approx(staying_usd)
