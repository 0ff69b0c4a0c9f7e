"""A spot pool's record says why it cannot hold part of its interruption reserve: its bound, or its current size
while it cannot grow (backed off after a stockout, blocked after a permanent error), or the units it is known to
hold while its state could not be read. Only the first is a bound, and only it is called one."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from agent.planning import PlanInput, PlannerMemory, plan_capacity
from config.schema import PlannerSettings
from models import AcceleratorFamily, CapacityPlan, CapacityTier, DemandForecast, PoolKind, PoolSpec, PoolState
from models.decision import CarryCause

NOW = datetime(2024, 1, 1, 12, tzinfo=UTC)
STEP = timedelta(minutes=5)
# 10 minutes' lead time at 3 interruptions an hour: half the spot units are held again in reserve.
SPOT = PoolSpec("spot", PoolKind.GPU_NODE_POOL, CapacityTier.SPOT, AcceleratorFamily.GPU, 8, 0, 10, 5.0,
                timedelta(minutes=10), ("train",), spot_interruption_per_hour=3.0)  # fmt: skip
OD = PoolSpec("od", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 10, 10.0,
              timedelta(minutes=10), ("train",))  # fmt: skip


def plan(
    chips: float,
    spot: PoolState | None,
    memory: PlannerMemory | None = None,
    last_read: Mapping[str, int] | None = None,
    spot_pool: PoolSpec = SPOT,
) -> CapacityPlan:
    forecast = DemandForecast("train", NOW, STEP, {0.9: (chips,) * 14}, chips, "test")
    states = {"od": PoolState("od", NOW, 0, 0)} | ({} if spot is None else {"spot": spot})
    given = PlanInput(NOW, STEP, [spot_pool, OD], states, {"train": forecast}, {"train": chips}, {"train": 0.9},
                      PlannerSettings(), memory=memory or PlannerMemory(), last_read_units=last_read or {})  # fmt: skip
    return plan_capacity(given)


def test_a_reserve_carried_for_a_backed_off_pool_is_not_said_to_be_over_its_bound() -> None:
    # 4 spot units (2 ready, 2 being replaced) serve 32 chips and want 2 more in reserve within bounds 0..10; the
    # back-off after a stockout holds the pool at 4, so on-demand holds the reserve.
    backed_off = PlannerMemory().back_off("spot", NOW + timedelta(minutes=10))
    out = plan(32.0, PoolState("spot", NOW, 2, 4), backed_off)
    spot = out.decisions["spot"]
    assert [(c.target, c.chips, c.cause) for c in spot.reserve_carries] == [("od", 16.0, CarryCause.BACKED_OFF)]
    assert "over the bound" not in spot.why()
    assert (
        "4 units of 8 chips + 2 spot reserve = 6 -> 16 chips of spot reserve over its current 4 units (backed off: "
        "cannot grow) held in od -> backoff: "
    ) in spot.why()
    assert spot.log_fields()["reserve_carries"] == "spot>od:chips=16:cause=backed-off"
    assert out.decisions["od"].carried_reserve_units == 2


def test_a_reserve_carried_for_a_blocked_pool_says_it_is_blocked() -> None:
    blocked = PlannerMemory().block("spot", "403 permission denied")
    spot = plan(32.0, PoolState("spot", NOW, 4, 4), blocked).decisions["spot"]
    assert [c.cause for c in spot.reserve_carries] == [CarryCause.BLOCKED]
    assert "16 chips of spot reserve over its current 4 units (blocked: cannot grow) held in od" in spot.why()


def test_a_reserve_carried_for_an_unread_pool_says_its_state_was_not_read() -> None:
    # The spot pool was last read at 3 units: it takes 24 of the 40 chips, od the rest and the reserve.
    spot = plan(40.0, None, last_read={"spot": 3}).decisions["spot"]
    assert [c.cause for c in spot.reserve_carries] == [CarryCause.NOT_READ]
    assert "over the bound" not in spot.why()
    assert (
        "3 units of 8 chips + 2 spot reserve = 5 -> 16 chips of spot reserve over the units it is known to hold "
        "(state not read: cannot grow) held in od -> missing-data: "
    ) in spot.why()


def test_a_reserve_its_bound_cuts_is_still_said_to_be_over_the_bound() -> None:
    # bounds 0..3 hold the 3 units of demand; a pool in back-off at its bound is cut by the bound all the same.
    small = PoolSpec("spot", PoolKind.GPU_NODE_POOL, CapacityTier.SPOT, AcceleratorFamily.GPU, 8, 0, 3, 5.0,
                     timedelta(minutes=10), ("train",), spot_interruption_per_hour=3.0)  # fmt: skip
    for memory in (PlannerMemory(), PlannerMemory().back_off("spot", NOW + timedelta(minutes=10))):
        spot = plan(40.0, PoolState("spot", NOW, 3, 3), memory, spot_pool=small).decisions["spot"]
        assert [c.cause for c in spot.reserve_carries] == [CarryCause.BOUND]
        assert "bounds 0..3: 3 -> 16 chips of spot reserve over the bound held in od" in spot.why()
        assert spot.log_fields()["reserve_carries"] == "spot>od:chips=16"
