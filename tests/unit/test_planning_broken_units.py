"""Broken units (TPU slices in error with work on them) are paid for and hold their place in the cloud: the planner
never asks a pool for more units than its ``max_units`` less its broken ones, whatever headroom, spot reserve or
``min_units`` would add, and the spot reserve such a pool cannot hold is held by the next eligible pool."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.planning import PlanInput, plan_capacity
from config.schema import PlannerSettings
from models import AcceleratorFamily, CapacityPlan, CapacityTier, DemandForecast, PoolKind, PoolSpec, PoolState

NOW = datetime(2024, 1, 1, 12, tzinfo=UTC)
STEP = timedelta(minutes=5)
CHIPS = 16
BROKEN = (("slice-1", "ERROR: 3 of its 4 hosts missing"),)


def slices(
    pool_id: str,
    tier: CapacityTier = CapacityTier.ON_DEMAND,
    *,
    lo: int = 0,
    hi: int = 2,
    lead: timedelta = timedelta(minutes=10),
    interruptions: float = 0.0,
) -> PoolSpec:
    return PoolSpec(pool_id, PoolKind.TPU_SLICE_GROUP, tier, AcceleratorFamily.TPU, CHIPS, lo, hi, 40.0, lead, ("a",),
                    spot_interruption_per_hour=interruptions)  # fmt: skip


def plan(pools: list[PoolSpec], states: list[PoolState], chips: float, headroom: int = 0) -> CapacityPlan:
    forecast = DemandForecast("a", NOW, STEP, {0.5: (chips,) * 14, 0.9: (chips,) * 14}, chips, "test")
    return plan_capacity(
        PlanInput(
            now=NOW,
            tick=STEP,
            pools=pools,
            states={s.pool_id: s for s in states},
            forecasts={"a": forecast},
            observed={"a": chips},
            service_levels={"a": 0.9},
            settings=PlannerSettings(headroom_units=headroom),
        )
    )


def test_headroom_never_takes_a_pool_with_a_broken_unit_past_its_max_units() -> None:
    # max_units 2: one ready slice and one broken one fill it. One slice of demand plus one of headroom asked for
    # a second slice, a third in the cloud.
    group = slices("slices")
    broken = PoolState("slices", NOW, 1, 1, broken_units=BROKEN)
    out = plan([group], [broken], float(CHIPS), headroom=1)
    assert out.resizes == ()
    assert out.targets.get("slices", 1) == 1
    assert "bounds 0..2 less 1 broken: 1" in out.decisions["slices"].why()
    # Without the broken slice the headroom slice is bought as before.
    whole = plan([group], [PoolState("slices", NOW, 1, 1)], float(CHIPS), headroom=1)
    assert [(r.from_units, r.to_units) for r in whole.resizes] == [(1, 2)]


def test_min_units_never_takes_a_pool_with_a_broken_unit_past_its_max_units() -> None:
    # min_units = max_units = 2: a slice broke, so one is counted; buying the second again makes three.
    group = slices("slices", lo=2)
    out = plan([group], [PoolState("slices", NOW, 1, 1, broken_units=BROKEN)], 0.0)
    assert out.resizes == ()


def test_the_spot_reserve_a_broken_unit_leaves_no_room_for_is_held_by_the_next_pool() -> None:
    # Spot, max_units 3, an hour's lead at 0.5 interruptions an hour: 2 slices of demand want 1 more in reserve,
    # which the broken slice leaves no room for: on-demand holds it instead of the spot group growing to 4 slices.
    spot = slices("spot", CapacityTier.SPOT, hi=3, lead=timedelta(hours=1), interruptions=0.5)
    ondemand = slices("ondemand", hi=10)
    states = [PoolState("spot", NOW, 2, 2, broken_units=BROKEN), PoolState("ondemand", NOW, 0, 0)]
    out = plan([spot, ondemand], states, 2.0 * CHIPS)
    assert [(r.pool_id, r.from_units, r.to_units) for r in out.resizes] == [("ondemand", 0, 1)]
    assert out.decisions["spot"].bounded_units == 2
    assert out.decisions["ondemand"].carried_reserve_units == 1
    assert f"{CHIPS} chips of spot reserve over the bound held in ondemand" in out.decisions["spot"].why()
