"""A budget paced on a forecast counts as burst the demand above the on-prem units that can take work now (read
each tick from the pool's capacity query), not above its ``max_units``: demand that on-prem nodes down cannot
serve is funded by the budget's share like any burst, instead of going to the cloud unpaced."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent.planning import PlanInput, plan_capacity
from agent.planning.budget import Budget, BudgetSpend
from agent.planning.groups import single_class_groups
from agent.planning.pacing import BurstProfile, onprem_chips, pace_needs
from config.schema import PlannerSettings
from models import AcceleratorFamily, CapacityTier, DemandForecast, PoolKind, PoolSpec, PoolState

NOW = datetime(2024, 1, 10, 6, 30, tzinfo=UTC)
STEP = timedelta(minutes=5)
CHIPS = 8
ONPREM = PoolSpec("onprem", PoolKind.ON_PREM, CapacityTier.ON_PREM, AcceleratorFamily.GPU, CHIPS, 0, 40, 0.0,
                  timedelta(minutes=10), ("a",))  # fmt: skip
SPOT = PoolSpec("spot", PoolKind.GPU_NODE_POOL, CapacityTier.SPOT, AcceleratorFamily.GPU, CHIPS, 0, 100, 8.0,
                timedelta(minutes=10), ("a",))  # fmt: skip
HOURS_LEFT = (datetime(2024, 2, 1, tzinfo=UTC) - NOW) / timedelta(hours=1)
PROFILE = BurstProfile({"a": (40.0,) * 24})  # 40 chips of burst every hour, at 1 USD per chip-hour
# Money for half the burst the profile expects to the end of the period: every group keeps half its burst now.
SPEND = BudgetSpend(Budget("burst", frozenset({"spot"}), monthly_cap_usd=40.0 * HOURS_LEFT / 2, pacing="forecast"),
                    NOW, 0.0, 0.0)  # fmt: skip
NEED = 40 * CHIPS + 40.0  # 360 chips: the 40 on-prem nodes and 40 chips above them


def test_pacing_counts_the_demand_on_prem_nodes_down_cannot_serve_as_burst() -> None:
    groups = single_class_groups(["a"], [ONPREM, SPOT])
    # All 40 nodes up: 320 on prem, half of the 40 chips above: 340.
    assert pace_needs(NOW, [ONPREM, SPOT], groups, {"a": NEED}, [SPEND], PROFILE, {}) == {"a": pytest.approx(340.0)}
    # 10 of the 40 nodes down: 240 on prem, half of the 120 chips above them: 300, not 340 (which left the 80 chips
    # of the nodes down to the cloud unpaced).
    paced = pace_needs(NOW, [ONPREM, SPOT], groups, {"a": NEED}, [SPEND], PROFILE, {}, {"onprem": 30})
    assert paced == {"a": pytest.approx(300.0)}
    # A pool whose capacity was not read counts at its max_units, as the planner plans it.
    assert onprem_chips(groups[0], {"onprem": ONPREM, "spot": SPOT}, {}) == 40 * CHIPS
    assert onprem_chips(groups[0], {"onprem": ONPREM, "spot": SPOT}, {"onprem": 30}) == 30 * CHIPS


def test_the_plan_paces_the_cloud_on_the_on_prem_units_read_this_tick() -> None:
    given = PlanInput(
        now=NOW, tick=STEP, pools=[ONPREM, SPOT], states={"spot": PoolState("spot", NOW, 0, 0)},
        forecasts={"a": DemandForecast("a", NOW, STEP, {0.9: (NEED,) * 3}, NEED, "test")}, observed={"a": NEED},
        service_levels={"a": 0.9}, settings=PlannerSettings(), budgets=[SPEND], burst_profile=PROFILE,
        onprem_units={"onprem": 30},
    )  # fmt: skip
    spot = plan_capacity(given).decisions["spot"]
    assert "budget pacing funds 300 of 360" in spot.why()
    assert spot.need_chips == pytest.approx(300.0 - 30 * CHIPS)  # 60 chips: half the burst, on spot
