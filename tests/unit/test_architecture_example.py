"""The decision record docs/architecture.md shows as an example is the one the planner renders from its inputs."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agent.planning import PlanInput, PlannerMemory, plan_capacity
from agent.planning.budget import Budget, BudgetSpend
from config.schema import PlannerSettings
from models import AcceleratorFamily, CapacityTier, DemandForecast, PoolKind, PoolSpec, PoolState

ARCHITECTURE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
NOW = datetime(2024, 1, 31, 14, tzinfo=UTC)  # 10 hours before the month ends
STEP = timedelta(minutes=5)


def documented_example() -> str:
    """The example record in docs/architecture.md, its wrapped lines joined into the one line it is."""
    block = r"Read a record as one line, for example \(wrapped here\):\n\n```\n(.*?)\n```"
    found = re.search(block, ARCHITECTURE.read_text(), re.DOTALL)
    assert found is not None, f"{ARCHITECTURE}: the example record after 'Read a record as one line' is gone"
    return " ".join(found.group(1).split("\n"))


def test_the_architecture_example_is_what_the_code_renders() -> None:
    # The example's inputs: a spot pool of 8-chip units at 8 USD a unit-hour, bounds 0..10, 3 reclaims an hour over
    # a 10-minute lead time, holding 2 units, the only pool that may serve train; a q0.9 peak of 50 chips within
    # the lead time and a tick, 41 now; headroom 1, at most 5 units more a tick; a monthly cap leaving 4 more units.
    spot = PoolSpec("spot", PoolKind.GPU_NODE_POOL, CapacityTier.SPOT, AcceleratorFamily.GPU, 8, 0, 10, 8.0,
                    timedelta(minutes=10), ("train",), spot_interruption_per_hour=3.0)  # fmt: skip
    forecast = DemandForecast("train", NOW, STEP, {0.9: (30.0, 50.0, 44.0, 99.0)}, 41.0, "test")
    # 10 hours left at 8 USD: 80 USD a unit; 100 spent and 2 units billed (160) leave 340 of 600: 4 more units
    budget = BudgetSpend(Budget("team", frozenset({"spot"}), monthly_cap_usd=600.0), NOW, 100.0, 0.0)
    given = PlanInput(NOW, STEP, [spot], {"spot": PoolState("spot", NOW, 2, 2)}, {"train": forecast},
                      {"train": 41.0}, {"train": 0.9}, PlannerSettings(headroom_units=1, max_scale_up_units_per_tick=5),
                      memory=PlannerMemory(), budgets=[budget])  # fmt: skip
    plan = plan_capacity(given)
    assert [(r.from_units, r.to_units, r.reason) for r in plan.resizes] == [(2, 6, plan.decisions["spot"].why())]
    assert plan.decisions["spot"].why() == documented_example()
