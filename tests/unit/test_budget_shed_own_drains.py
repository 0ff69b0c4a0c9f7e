"""A shed counts the agent's own nodes being drained as billing one more tick, not to the period's end: a release
whose drains take several ticks is shed once, not again at each tick while they run. Its take-back of those nodes
is given up before any other unit goes; a drain that ends without deleting its node gives the unit back, counted
again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent.planning import PlanInput, plan_capacity
from agent.planning.budget import Budget, BudgetSpend
from config.schema import PlannerSettings
from models import (
    AcceleratorFamily,
    CapacityPlan,
    CapacityTier,
    DemandForecast,
    PoolKind,
    PoolSpec,
    PoolState,
    SkipReason,
)

NOW = datetime(2026, 12, 7, 12, 15, tzinfo=UTC)
TICK = timedelta(minutes=5)
POOL = PoolSpec("west", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 16, 8.0,
                timedelta(minutes=10), ("train",))  # fmt: skip
UNIT_TO_MONTH_END = 8.0 * (datetime(2027, 1, 1, tzinfo=UTC) - NOW).total_seconds() / 3600.0  # one unit, 8 USD/h
SPENT = 1000.0
# 2 busy units and 6 idle ones: the cap pays for 5 units to the month's end, 3 short (with 20 USD to spare)
BUDGET = Budget("team", frozenset({"west"}), monthly_cap_usd=SPENT + 5 * UNIT_TO_MONTH_END + 20.0)
IDLE_SINCE = (NOW - timedelta(hours=1),)
SETTINGS = PlannerSettings(headroom_units=6)  # the idle units are the planner's: it keeps them


def plan(state: PoolState) -> CapacityPlan:
    forecast = DemandForecast("train", NOW, TICK, {0.5: (16.0,) * 6, 0.9: (16.0,) * 6}, 16.0, "test")
    return plan_capacity(
        PlanInput(
            now=NOW, tick=TICK, pools=[POOL], states={"west": state}, forecasts={"train": forecast},
            observed={"train": 16.0}, service_levels={"train": 0.9}, settings=SETTINGS,
            budgets=[BudgetSpend(BUDGET, NOW, SPENT, 0.0)], drained=frozenset({"west"}),
        )
    )  # fmt: skip


def state(ready: int, idle: int, draining: int = 0, takeable: int = 0) -> PoolState:
    return PoolState("west", NOW, ready, ready, idle_units=idle, idle_since=IDLE_SINCE * idle,
                     draining_units=draining, takeable_units=takeable)  # fmt: skip


@pytest.mark.parametrize(
    ("pool", "target"),
    [
        # the tick of the release: 3 of the 6 idle units go; so again if their drains time out and uncordon their
        # nodes (the pool reads 8 units again, none draining): the units are back and count again
        (state(8, 6), 5),
        # their drains run (3 idle units still idle beside them): nothing more goes, 5 units are left once they end
        # (2 before: released to 2 at each tick the drains ran, 3, 3, 2 and 2 in all)
        (state(5, 3, draining=3), 5),
        (state(5, 3, draining=3, takeable=3), 5),
    ],
    ids=["release", "drains-running", "drains-running-takeable"],
)
def test_a_release_being_drained_is_not_shed_again(pool: PoolState, target: int) -> None:
    out = plan(pool)
    assert out.targets["west"] == target
    assert [(r.from_units, r.to_units) for r in out.resizes] == ([] if target == pool.target_units else [(8, 5)])


def test_a_take_back_of_the_nodes_being_drained_is_given_up_and_said() -> None:
    # The planner asks for 8 units (2 busy and headroom) and would take back the 3 idle nodes being drained, which
    # bill nothing more now but to the month's end once kept: the cap is 3 units short, so it keeps them going.
    pool = state(5, 3, draining=3, takeable=3)
    unbudgeted = plan_capacity(
        PlanInput(
            now=NOW, tick=TICK, pools=[POOL], states={"west": pool},
            forecasts={"train": DemandForecast("train", NOW, TICK, {0.5: (16.0,) * 6, 0.9: (16.0,) * 6}, 16.0, "t")},
            observed={"train": 16.0}, service_levels={"train": 0.9}, settings=SETTINGS,
            drained=frozenset({"west"}),
        )
    )  # fmt: skip
    assert [(r.from_units, r.to_units) for r in unbudgeted.resizes] == [(5, 8)]
    out = plan(pool)
    assert out.resizes == ()
    budget_skips = [s.detail for s in out.skips if s.reason is SkipReason.BUDGET]
    assert "budget 'team' projected over its monthly cap: its 3 idle nodes being drained are not taken back" in (
        budget_skips
    )
