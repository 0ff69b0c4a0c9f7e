"""A drain's units are marked as being released at the tick it starts and the next one, not for as long as it lasts.
A drain that starts and stays blocked (a PodDisruptionBudget refusing its evictions) is reported started at every
tick until its timeout, 15 minutes by default, and its nodes stay in the pool's units being drained: the agent
renewed its mark of them at each tick, so the other agents sharing the budget counted them as shed already, and shed
nothing for them, for the drain's whole life while they still billed. The mark now names a pool's nodes being
drained only up to the units its previous tick started releasing; a drain still blocked after that is counted by the
others as staying once its mark is gone.

West's release of 3 units at 12:00 is carried out as 3 drains that stay blocked; east reads west's marks after each
of west's ticks, from two connections to one real PostgreSQL ledger."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.budget_reserve import BudgetReserver
from agent.budget_reserve_caps import releasing_units
from agent.ledger.postgres import PostgresLedger
from agent.planning.budget import Budget
from models import ActionResult, ActionStatus, CapacityPlan, PoolState, Resize
from models.plan import drain_key
from tests import shared_budget_rig as rig
from tests.postgres.fixtures import POSTGRES, Database
from tests.unit.test_budget_enforcement import spec

START = datetime(2024, 1, 15, 12, tzinfo=UTC)
TICK = timedelta(minutes=5)
POOLS = {"west": spec("west", rig.UNIT_HOUR_USD), "east": spec("east", rig.UNIT_HOUR_USD)}
RELEASE = Resize("west", 8, 5, "budget 'team' projected over its monthly cap: releasing 3 idle units", "west@12:00->5")


def _reserver(ledger: PostgresLedger, own: str, other: str) -> BudgetReserver:
    team = Budget("team", frozenset(POOLS), monthly_cap_usd=1e6, remote_pools=frozenset({other}))
    return BudgetReserver(ledger, [team], {own: POOLS[own]}, f"cluster-{own}", timedelta(hours=1), tick=TICK)


def _west_tick(west: BudgetReserver, now: datetime) -> None:
    """West's commit at ``now``: at 12:00 the release, its drains started; later, its 3 nodes still being drained."""
    if now == START:
        state = PoolState("west", now, ready_units=8, target_units=8)
        plan = CapacityPlan(now, resizes=(RELEASE,))
        results = [
            ActionResult(drain_key(RELEASE.key, f"west-idle-{i}"), "west", ActionStatus.STARTED, now) for i in range(3)
        ]
    else:
        state = PoolState("west", now, ready_units=5, target_units=5, draining_units=3)
        plan, results = CapacityPlan(now), []
    west.commit(now, {"west": state.billed_units}, releasing=releasing_units(plan, results, {"west": state}))


@POSTGRES
def test_a_blocked_drains_units_are_marked_at_its_first_two_ticks_only(postgres_database: Database) -> None:
    west_ledger = PostgresLedger(postgres_database.url, postgres_database.password)
    east_ledger = PostgresLedger(postgres_database.url, postgres_database.password)
    marked = []
    try:
        west, east = _reserver(west_ledger, "west", "east"), _reserver(east_ledger, "east", "west")
        for i in range(5):  # 12:00 to 12:20, the drains blocked all along
            now = START + i * TICK
            _west_tick(west, now)
            marked.append(east.releasing_elsewhere(now + timedelta(minutes=1))["team"])
    finally:
        west_ledger.close()
        east_ledger.close()

    # 3 units from the tick after each mark to the month's end (8 USD a unit-hour): at 12:00 and 12:05, then none
    # (before: renewed at every tick, 12:10 to 12:20 included)
    month_end = datetime(2024, 2, 1, tzinfo=UTC)
    expected = [3 * rig.UNIT_HOUR_USD * (month_end - (START + (i + 1) * TICK)).total_seconds() / 3600 for i in range(2)]
    assert [round(usd, 2) for usd in marked] == [round(usd, 2) for usd in expected] + [0.0, 0.0, 0.0]
