"""A budget's hard stop takes units still provisioning (serving nothing yet) before busy ones, in the pools whose
release takes those first (a size change removes units in flight before ready ones); in a pool released by drains
of its nodes, a unit in flight cannot be named: a drain there takes a ready node, busy or not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.planning import PlanInput, plan_capacity
from agent.planning.budget import Budget, BudgetSpend
from agent.planning.enforcement import enforce_budgets
from config.schema import PlannerSettings
from models import (
    AcceleratorFamily,
    CapacityPlan,
    CapacityTier,
    DemandForecast,
    PoolKind,
    PoolSpec,
    PoolState,
)

NOW = datetime(2024, 3, 31, 14, 0, tzinfo=UTC)
TICK = timedelta(minutes=1)


def spec(pool_id: str, price: float, tier: CapacityTier) -> PoolSpec:
    return PoolSpec(pool_id, PoolKind.GPU_NODE_POOL, tier, AcceleratorFamily.GPU, 8, 0, 20, price,
                    timedelta(minutes=10), ("c",))  # fmt: skip


POOLS = {"spot": spec("spot", 10.0, CapacityTier.SPOT), "ondemand": spec("ondemand", 30.0, CapacityTier.ON_DEMAND)}
BUDGET = Budget("team-a", frozenset(POOLS), monthly_cap_usd=800.0, commit_horizon=timedelta(hours=2))
# 4 spot (10 USD an hour) and 4 on-demand units (30 USD): 160 USD an hour, 5.33 USD for the next two ticks, 0.90
# USD short. A unit released now saves its second tick: 0.17 USD spot, 0.50 on-demand.
SPEND = BudgetSpend(BUDGET, NOW, 800.0 - 160.0 * 2 / 60 + 0.9, 0.0)


def stops(provisioning: dict[str, int] | None) -> list[tuple[str, int, int, int]]:
    billed = {"spot": 4, "ondemand": 4}
    out = enforce_budgets(NOW, [SPEND], POOLS, billed, {}, {}, TICK, idle_now={}, provisioning=provisioning)
    return [(s.pool_id, s.units, s.idle_units, s.provisioning_units) for s in out.shed if s.forced]


def test_units_still_provisioning_go_after_idle_ones_and_before_busy_ones() -> None:
    # The 4 spot units are still provisioning: they go first (0.67 USD), then one busy on-demand unit, instead of
    # two busy on-demand units while the spot units serve nothing.
    assert stops({"spot": 4}) == [("ondemand", 1, 0, 0), ("spot", 4, 0, 4)]
    # Not told of any (a pool released by drains): every unit not idle is busy, as before.
    assert stops(None) == [("ondemand", 2, 0, 0)]
    # An idle unit still goes before one provisioning.
    out = enforce_budgets(NOW, [SPEND], POOLS, {"spot": 4, "ondemand": 4}, {}, {}, TICK,
                          idle_now={"ondemand": 1}, provisioning={"spot": 4})  # fmt: skip
    assert [(s.pool_id, s.units, s.idle_units) for s in out.shed if s.forced] == [("ondemand", 1, 1), ("spot", 3, 0)]


def plan(drained: frozenset[str] | None) -> CapacityPlan:
    states = {"spot": PoolState("spot", NOW, 0, 4), "ondemand": PoolState("ondemand", NOW, 4, 4)}
    forecast = DemandForecast("c", NOW, TICK, {0.5: (64.0,) * 20, 0.9: (64.0,) * 20}, 64.0, "test")
    return plan_capacity(
        PlanInput(
            now=NOW, tick=TICK, pools=list(POOLS.values()), states=states, forecasts={"c": forecast},
            observed={"c": 64.0}, service_levels={"c": 0.9}, settings=PlannerSettings(), budgets=[SPEND],
            drained=drained,
        )
    )  # fmt: skip


def test_the_plans_hard_stop_releases_the_units_in_flight_of_a_pool_resized_before_busy_ones() -> None:
    # The spot pool is shrunk by a size change (no drainer): its 4 units in flight go, and one busy on-demand unit.
    resized = plan(frozenset({"ondemand"}))
    assert {r.pool_id: (r.from_units, r.to_units, r.forced) for r in resized.resizes} == {
        "spot": (4, 0, True),
        "ondemand": (4, 3, True),
    }
    assert "releasing 4 units (0 of them busy" in resized.decisions["spot"].budget_cuts[-1].detail
    assert "releasing 1 units (1 of them busy" in resized.decisions["ondemand"].budget_cuts[-1].detail
    # Drained, the spot pool has no node to take for a unit in flight: two busy on-demand units go, as before.
    for drained in (frozenset(POOLS), None):
        assert [(r.pool_id, r.from_units, r.to_units) for r in plan(drained).resizes] == [("ondemand", 4, 2)]
