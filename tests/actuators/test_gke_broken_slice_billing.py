"""A broken TPU slice (in ERROR, short of hosts, its job's pod on it) is paid for though it serves nothing: the meter
charges it as a whole slice, and the planner's room for its group is the group's max_units less its broken slices,
so the slice bought in its place never takes the group past max_units."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from agent.budget_watch import BudgetWatch
from agent.ledger import InMemoryLedger
from agent.planning import PlanInput, plan_capacity
from config import settings_from_mapping
from config.schema import PlannerSettings
from models import PoolState
from tests.actuators.test_gke_broken_slices import _lose_hosts
from tests.actuators.test_gke_slice_errors import Rig, rig  # noqa: F401  (the fixture)
from tests.contract.harnesses import POOL
from tests.unit.test_planner import forecast

PRICE = 20.0  # USD a slice-hour
SETTINGS = settings_from_mapping(
    {
        "demand_classes": [{"name": "train", "family": "tpu"}],
        "pools": [
            {
                "id": POOL,
                "kind": "tpu-slice-group",
                "family": "tpu",
                "chips_per_unit": 16,
                "max_units": 2,
                "price_per_unit_hour_usd": PRICE,
                "lead_time": "30m",
                "serves": ["train"],
            }
        ],
        "budgets": [{"name": "tpu", "pools": [POOL], "monthly_cap_usd": 100000.0}],
    }
)


@pytest.fixture
def broken(rig: Rig) -> PoolState:  # noqa: F811
    """The group read with v5e-0 ready and v5e-1 broken: 1 of its 4 hosts left, the job's pod on it."""
    rig.train("v5e-1")
    _lose_hosts(rig, "v5e-1", keep=1)
    rig.gke.report_error("v5e-1", conditions=())
    (state,) = rig.actuator.list_pools()
    assert (state.ready_units, state.target_units, [name for name, _ in state.broken_units]) == (1, 1, ["v5e-1"])
    return state


def test_a_broken_slice_is_charged_as_a_whole_slice(broken: PoolState) -> None:
    assert broken.billed_units == 2
    tick = timedelta(minutes=1)
    watch = BudgetWatch(SETTINGS, {p.pool_id: p for p in SETTINGS.pool_specs()}, InMemoryLedger(), tick=tick)
    for minute in range(61):  # an hour of ticks, the group read as it is
        at = broken.observed_at + minute * tick
        (spend,) = watch.observe(at, {POOL: replace(broken, observed_at=at)})

    assert spend.spent_period_usd == pytest.approx(2 * PRICE)  # both slices GKE bills, the broken one too


def test_the_slice_bought_in_a_broken_ones_place_stays_within_max_units(broken: PoolState) -> None:
    def plan_for(slices: float) -> dict[str, int]:
        plan = plan_capacity(
            PlanInput(
                now=broken.observed_at,
                tick=timedelta(minutes=1),
                pools=SETTINGS.pool_specs(),
                states={POOL: broken},
                forecasts={"train": forecast("train", [slices * 16] * 40)},
                observed={"train": slices * 16},
                service_levels={"train": 0.9},
                settings=PlannerSettings(),
            )
        )
        return {r.pool_id: r.to_units for r in plan.resizes}

    assert plan_for(1) == {}  # v5e-0 serves it; the broken v5e-1 is left to a person
    assert plan_for(2) == {}  # a second ready slice would be a third in GKE, over max_units 2
    assert plan_for(2) == plan_for(3)
