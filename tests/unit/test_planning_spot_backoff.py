"""A spot pool backed off after a stockout (or blocked) cannot grow: its demand spills to the next eligible pool
in fill order, and so does the part of its interruption reserve above its current size, held there and named in
both pools' records instead of lost with the scale-up the back-off holds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.planning import PlanInput, PlannerMemory, plan_capacity
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

NOW = datetime(2024, 1, 1, 12, tzinfo=UTC)
STEP = timedelta(minutes=5)
CHIPS = 8
# An hour's lead time at 0.5 interruptions an hour: half the spot units are held again in reserve.
SPOT = PoolSpec("spot", PoolKind.GPU_NODE_POOL, CapacityTier.SPOT, AcceleratorFamily.GPU, CHIPS, 0, 10, 20.0,
                timedelta(hours=1), ("a",), spot_interruption_per_hour=0.5)  # fmt: skip
ONDEMAND = PoolSpec("ondemand", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, CHIPS, 0, 10,
                    40.0, timedelta(minutes=10), ("a",))  # fmt: skip


def plan(chips: float, memory: PlannerMemory, spot_units: int = 4) -> CapacityPlan:
    forecast = DemandForecast("a", NOW, STEP, {0.5: (chips,) * 14, 0.9: (chips,) * 14}, chips, "test")
    return plan_capacity(
        PlanInput(
            now=NOW,
            tick=STEP,
            pools=[SPOT, ONDEMAND],
            states={
                "spot": PoolState("spot", NOW, spot_units, spot_units),
                "ondemand": PoolState("ondemand", NOW, 0, 0),
            },
            forecasts={"a": forecast},
            observed={"a": chips},
            service_levels={"a": 0.9},
            settings=PlannerSettings(),
            memory=memory,
        )
    )


def ups(out: CapacityPlan) -> list[tuple[str, int, int]]:
    return [(r.pool_id, r.from_units, r.to_units) for r in out.resizes]


def test_the_reserve_of_a_spot_pool_backed_off_by_a_stockout_is_held_on_demand() -> None:
    backed_off = PlannerMemory().back_off("spot", NOW + timedelta(minutes=30))
    # 4 spot units serve 32 chips and want 2 more in reserve; the back-off holds the spot pool at 4.
    out = plan(4.0 * CHIPS, backed_off)
    assert ups(out) == [("ondemand", 0, 2)]
    assert out.decisions["ondemand"].carried_reserve_units == 2
    assert (
        f"{2 * CHIPS} chips of spot reserve over its current 4 units (backed off: cannot grow) held in ondemand"
        in out.decisions["spot"].why()
    )
    assert [s.reason for s in out.skips if s.pool_id == "spot"] == [SkipReason.BACKOFF]
    # Demand above the spot pool's size goes on demand too, with the reserve of the units spot still serves.
    out = plan(8.0 * CHIPS, backed_off)
    assert ups(out) == [("ondemand", 0, 4 + 2)]
    # Once the back-off is over the spot pool holds its own reserve again.
    assert ups(plan(4.0 * CHIPS, PlannerMemory())) == [("spot", 4, 6)]


def test_the_reserve_within_the_size_a_backed_off_spot_pool_holds_stays_there() -> None:
    backed_off = PlannerMemory().back_off("spot", NOW + timedelta(minutes=30))
    # 10 spot units hold 4 units of demand and their reserve of 2: nothing to carry, nothing to buy.
    out = plan(4.0 * CHIPS, backed_off, spot_units=10)
    assert out.decisions["ondemand"].carried_reserve_units == 0
    assert all(r.pool_id != "ondemand" for r in out.resizes)


def test_the_reserve_of_a_blocked_spot_pool_is_held_on_demand() -> None:
    blocked = PlannerMemory().block("spot", "403 permission denied")
    out = plan(4.0 * CHIPS, blocked)
    assert ups(out) == [("ondemand", 0, 2)]
