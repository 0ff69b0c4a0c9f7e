"""A pool whose state could not be read takes no more demand than it is known to hold (the units the agent last read
it at, else the units the ledger last recorded it holding, else none): the rest goes to the next eligible pool, which
is resized, while the unread pool is held, never shrunk."""

from __future__ import annotations

from agent.planning import PlanInput, PlannerMemory, plan_capacity
from agent.planning.budget import Budget, BudgetSpend
from config.schema import PlannerSettings
from models import CapacityPlan, CapacityTier, PoolState, SkipReason
from tests.unit.test_planner import NOW, STEP, forecast, plan_for, pool, state

SPOT = pool("spot", tier=CapacityTier.SPOT, price=3.0, hi=50)
ONDEMAND = pool("od", tier=CapacityTier.ON_DEMAND, price=8.0, hi=50)


def _with_ledger(
    states: list[PoolState], last_units: dict[str, int], last_read: dict[str, int] | None = None
) -> CapacityPlan:
    budget = Budget("team", frozenset({"spot", "od"}), monthly_cap_usd=1e9)
    return plan_capacity(
        PlanInput(
            now=NOW, tick=STEP, pools=[SPOT, ONDEMAND], states={s.pool_id: s for s in states},
            forecasts={"a": forecast("a", [160.0] * 3)}, observed={"a": 160.0}, service_levels={"a": 0.9},
            settings=PlannerSettings(), memory=PlannerMemory(),
            budgets=[BudgetSpend(budget, NOW, 0.0, 0.0, last_units=last_units)], last_read_units=last_read or {},
        )
    )  # fmt: skip


def test_an_unread_pool_with_no_known_units_passes_its_demand_to_the_next_pool() -> None:
    plan = plan_for([SPOT, ONDEMAND], [state("od", 0)], {"a": [160] * 3}, {"a": 160})
    assert {r.pool_id: (r.from_units, r.to_units) for r in plan.resizes} == {"od": (0, 20)}
    assert [(s.pool_id, s.reason) for s in plan.skips] == [("spot", SkipReason.MISSING_DATA)]
    assert plan.decisions["od"].need_chips == 160.0
    assert plan.decisions["spot"].need_chips == 0.0


def test_an_unread_pool_keeps_the_demand_of_the_units_the_ledger_last_recorded() -> None:
    plan = _with_ledger([state("od", 0)], {"spot": 5})
    # 5 spot units (40 chips) are held there; the other 120 chips go on demand.
    assert {r.pool_id: r.to_units for r in plan.resizes} == {"od": 15}
    assert plan.decisions["spot"].need_chips == 40.0
    assert [(s.pool_id, s.reason) for s in plan.skips] == [("spot", SkipReason.MISSING_DATA)]


def test_an_unread_pool_is_held_not_shrunk_when_its_demand_goes_elsewhere() -> None:
    idle = state("od", 10, idle_minutes=(60,) * 10)
    plan = _with_ledger([idle], {"spot": 20})
    # demand fits in the 20 spot units last recorded: on-demand may release, the unread spot pool is not touched
    assert all(r.pool_id != "spot" for r in plan.resizes)
    assert ("spot", SkipReason.MISSING_DATA) in [(s.pool_id, s.reason) for s in plan.skips]


def _unread_spot(last_read: dict[str, int]) -> CapacityPlan:
    """Spot (in no budget) could not be read this tick; the agent read it at ``last_read`` units before."""
    return plan_capacity(
        PlanInput(
            now=NOW, tick=STEP, pools=[SPOT, ONDEMAND], states={"od": state("od", 0)},
            forecasts={"a": forecast("a", [160.0] * 3)}, observed={"a": 160.0}, service_levels={"a": 0.9},
            settings=PlannerSettings(), memory=PlannerMemory(), last_read_units=last_read,
        )
    )  # fmt: skip


def test_a_pool_read_last_tick_keeps_its_demand_through_one_failed_read() -> None:
    plan = _unread_spot({"spot": 20})
    # the 20 spot units (160 chips) the agent last read still serve the demand: nothing is bought on demand
    assert plan.resizes == ()
    assert plan.decisions["spot"].need_chips == 160.0
    assert plan.decisions["od"].need_chips == 0.0
    assert [(s.pool_id, s.reason) for s in plan.skips] == [("spot", SkipReason.MISSING_DATA)]


def test_only_the_demand_above_the_units_last_read_goes_to_the_next_pool() -> None:
    plan = _unread_spot({"spot": 15})
    assert {r.pool_id: (r.from_units, r.to_units) for r in plan.resizes} == {"od": (0, 5)}
    assert plan.decisions["spot"].need_chips == 120.0


def test_the_units_last_read_come_before_the_ledgers_record() -> None:
    plan = _with_ledger([state("od", 0)], {"spot": 5}, last_read={"spot": 20})
    assert plan.resizes == ()
    assert plan.decisions["spot"].need_chips == 160.0


def test_the_units_last_read_never_exceed_the_pools_max_units() -> None:
    # read at 20 units before its max_units was lowered to 12: it is known to hold no more than 12 that serve
    small = pool("spot", tier=CapacityTier.SPOT, price=3.0, hi=12)
    capped = plan_capacity(
        PlanInput(
            now=NOW, tick=STEP, pools=[small, ONDEMAND], states={"od": state("od", 0)},
            forecasts={"a": forecast("a", [160.0] * 3)}, observed={"a": 160.0}, service_levels={"a": 0.9},
            settings=PlannerSettings(), memory=PlannerMemory(), last_read_units={"spot": 20},
        )
    )  # fmt: skip
    assert {r.pool_id: r.to_units for r in capped.resizes} == {"od": 8}
