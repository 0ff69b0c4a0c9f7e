"""A hard stop deferred for a pool nobody knows the units of (never read, no record in the ledger) says so: the pool
is not shown holding 0 units, which an operator would read as known to be empty, but as counted at nothing with its
spend left out of the projection; and the pool's skip does not say the stop keeps it 'at those units'."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.budget_alerts import hard_stop_deferred_event
from agent.planning import PlanInput, plan_capacity
from agent.planning.budget import Budget, BudgetSpend
from agent.planning.enforcement import deferred_stops
from config.schema import PlannerSettings
from models import CapacityTier, PoolKind, PoolState, SkipReason
from tests.unit.test_planner import forecast, pool

NOW = datetime(2024, 1, 31, 14, tzinfo=UTC)
TICK = timedelta(minutes=1)
POOLS = [pool("gpu", hi=10), pool("h100", price=80.0, hi=10)]
BUDGET = Budget("team", frozenset({"gpu", "h100"}), monthly_cap_usd=3000.0, commit_horizon=timedelta(minutes=5))
# the money left (0.10 USD) does not pay for gpu's 4 units over the next two ticks; h100 unread since now, unknown
SPEND = BudgetSpend(BUDGET, NOW, 2999.9, 0.0, unread_since={"h100": NOW})
NOT_KNOWN = "h100 (not known: counted at nothing, its spend not in this projection)"


def test_the_deferred_stop_alert_shows_a_pool_nobody_knows_as_not_known() -> None:
    [deferred] = deferred_stops(NOW, [SPEND], {p.pool_id: p for p in POOLS}, {"gpu": 4}, TICK, {})
    assert deferred.unread == (("h100", None),)
    event = hard_stop_deferred_event(deferred, NOW)
    assert NOT_KNOWN in event.summary
    assert event.details["unread pools (counted at)"] == NOT_KNOWN
    assert "(0 units)" not in event.summary


def test_a_known_unread_pool_is_still_shown_at_its_units() -> None:
    [deferred] = deferred_stops(NOW, [SPEND], {p.pool_id: p for p in POOLS}, {"gpu": 4}, TICK, {"h100": 2})
    assert deferred.unread == (("h100", 2),)
    assert hard_stop_deferred_event(deferred, NOW).details["unread pools (counted at)"] == "h100 (2 units)"


def test_the_unknown_pools_skip_says_the_stop_runs_without_it_not_at_its_units() -> None:
    plan = plan_capacity(
        PlanInput(
            now=NOW,
            tick=TICK,
            pools=POOLS,
            states={"gpu": PoolState("gpu", NOW, 4, 4)},
            forecasts={"a": forecast("a", [32.0] * 4)},
            observed={"a": 32.0},
            service_levels={"a": 0.9},
            settings=PlannerSettings(),
            budgets=[SPEND],
            last_read_units={},
        )
    )
    [skip] = [s for s in plan.skips if s.pool_id == "h100" and s.reason is SkipReason.BUDGET]
    assert "hard stop not started" in skip.detail
    assert "kept at those units" not in skip.detail
    assert "its units not known" in skip.detail


def test_an_unread_on_prem_pool_known_by_nobody_is_said_to_be_counted_at_its_max_units() -> None:
    # an on-prem pool is never resized: not read and with no record, it is counted at its max_units, not at nothing
    rack = pool("rack", tier=CapacityTier.ON_PREM, kind=PoolKind.ON_PREM, lo=0, hi=2, price=5.0)
    budget = Budget("team", frozenset({"gpu", "rack"}), monthly_cap_usd=3000.0, commit_horizon=timedelta(minutes=5))
    spend = BudgetSpend(budget, NOW, 2999.9, 0.0, unread_since={"rack": NOW})
    plan = plan_capacity(
        PlanInput(
            now=NOW,
            tick=TICK,
            pools=[POOLS[0], rack],
            states={"gpu": PoolState("gpu", NOW, 4, 4)},
            forecasts={"a": forecast("a", [32.0] * 4)},
            observed={"a": 32.0},
            service_levels={"a": 0.9},
            settings=PlannerSettings(),
            budgets=[spend],
            last_read_units={},
        )
    )
    [skip] = [s for s in plan.skips if s.pool_id == "rack" and s.reason is SkipReason.BUDGET]
    assert "it is counted at its max_units, 2, as an on-prem pool" in skip.detail
    assert "kept at those units" in skip.detail
