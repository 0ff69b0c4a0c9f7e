"""Where busy units hold the demand they may serve, and where they do not: a unit idle for a moment still holds
(its chips are freed for a cheaper pool only after the pool's idle window, as a release waits), and a pool whose
classes have different eligible pools holds nothing (which class its busy units run is not read)."""

from __future__ import annotations

from datetime import timedelta

from agent.planning import PlanInput, PlannerMemory, plan_capacity
from config.schema import PlannerSettings
from models import AcceleratorFamily, CapacityTier, DemandForecast, PoolKind, PoolSpec, PoolState
from tests.unit.test_planner_busy_units import NOW, OD, SPOT, STEP, busy, plan, resizes


def _just_idle(pool_id: str, units: int, idle_for: timedelta) -> PoolState:
    """``units`` ready, one of them (``<pool_id>-0``) idle for ``idle_for``, the rest running work."""
    return PoolState(
        pool_id, NOW, units, units, idle_units=1, idle_since=(NOW - idle_for,), idle_nodes=(f"{pool_id}-0",)
    )


def test_a_unit_idle_for_a_moment_does_not_buy_spot_that_the_next_pod_leaves_unused() -> None:
    # a pod on od-0 ended a moment ago; the next one will be scheduled there again (the node is already up)
    moments = []
    for _ in range(3):
        first = resizes(plan([SPOT, OD], [busy("spot", 0), _just_idle("od", 5, timedelta(seconds=30))], 40.0))
        grown = {p: t for p, _, t in first}.get("spot", 0)
        # od is 5 busy again; whatever spot bought sat idle for an hour
        second = resizes(plan([SPOT, OD], [busy("spot", grown, idle=grown), busy("od", 5)], 40.0))
        moments.append((first, second))
    # before: spot 0 -> 2 at each moment, 2 -> 0 an hour later, od at 5 throughout
    assert moments == [([], [])] * 3


def test_a_unit_idle_for_the_window_frees_its_chips_for_the_cheaper_pool() -> None:
    settings = PlannerSettings()
    window = max(settings.scale_down_stabilization, OD.lead_time * settings.idle_hold_lead_times)
    just_short = plan([SPOT, OD], [busy("spot", 0), _just_idle("od", 5, window - timedelta(seconds=1))], 40.0)
    assert resizes(just_short) == []
    settled = plan([SPOT, OD], [busy("spot", 0), _just_idle("od", 5, window)], 40.0)
    assert sorted(resizes(settled)) == [("od", 5, 4), ("spot", 0, 2)]  # 8 chips: 1 unit and 1 of reserve


def _pool(pool_id: str, price: float, serves: tuple[str, ...]) -> PoolSpec:
    return PoolSpec(pool_id, PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 10, price,
                    timedelta(minutes=10), serves, spot_interruption_per_hour=0.0)  # fmt: skip


def test_busy_units_of_a_pool_whose_classes_go_to_different_pools_leave_no_class_without_room() -> None:
    # od serves infer and train, each class also has its own cheaper pool; od's 5 busy units run train's 40 chips
    # (its pods are running), infer's 40 chips are new and served first (higher waiting cost)
    od = _pool("od", 10.0, ("infer", "train"))
    cheap_infer = _pool("cheap-infer", 5.0, ("infer",))
    cheap_train = _pool("cheap-train", 5.0, ("train",))
    forecasts = {c: DemandForecast(c, NOW, STEP, {0.9: (40.0,) * 14}, 40.0, "test") for c in ("infer", "train")}
    states = [busy("od", 5), busy("cheap-infer", 0), busy("cheap-train", 0)]
    out = plan_capacity(PlanInput(NOW, STEP, [od, cheap_infer, cheap_train], {s.pool_id: s for s in states},
                                  forecasts, {"infer": 40.0, "train": 40.0}, {"infer": 0.9, "train": 0.9},
                                  PlannerSettings(), waiting_costs={"infer": 10.0, "train": 1.0},
                                  memory=PlannerMemory()))  # fmt: skip
    # before: od's busy chips were credited to infer, and only cheap-train grew (0 -> 5): infer's pending 40 chips
    # had nowhere to run. Now each class is placed cheapest first on its own pool (od's units go as they fall idle)
    assert sorted(resizes(out)) == [("cheap-infer", 0, 5), ("cheap-train", 0, 5)]


def test_busy_units_of_a_pool_whose_classes_share_their_pools_still_hold() -> None:
    # od and spot both serve infer and train: whichever class od's 5 busy units run, the rest goes to spot alike
    od = _pool("od", 10.0, ("infer", "train"))
    spot = _pool("spot", 5.0, ("infer", "train"))
    forecasts = {
        c: DemandForecast(c, NOW, STEP, {0.9: (v,) * 14}, v, "test") for c, v in (("infer", 24.0), ("train", 32.0))
    }
    states = [busy("od", 5), busy("spot", 0)]
    out = plan_capacity(PlanInput(NOW, STEP, [od, spot], {s.pool_id: s for s in states}, forecasts,
                                  {"infer": 24.0, "train": 32.0}, {"infer": 0.9, "train": 0.9}, PlannerSettings(),
                                  waiting_costs={"infer": 10.0, "train": 1.0}, memory=PlannerMemory()))  # fmt: skip
    # 56 chips, 40 of them run on od: spot grows for the other 16 only (0 -> 7 for all 56 without the hold)
    assert resizes(out) == [("spot", 0, 2)]
