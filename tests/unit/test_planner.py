"""The planner: table-driven rules and property-based invariants."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.planning import PlanInput, PlannerMemory, plan_capacity
from agent.planning.groups import demand_groups
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


def pool(
    pool_id: str = "gpu",
    *,
    tier: CapacityTier = CapacityTier.ON_DEMAND,
    kind: PoolKind = PoolKind.GPU_NODE_POOL,
    chips: int = 8,
    lo: int = 0,
    hi: int = 100,
    price: float = 8.0,
    lead: int = 10,
    serves: tuple[str, ...] = ("a",),
) -> PoolSpec:
    family = AcceleratorFamily.TPU if kind is PoolKind.TPU_SLICE_GROUP else AcceleratorFamily.GPU
    return PoolSpec(pool_id, kind, tier, family, chips, lo, hi, price, timedelta(minutes=lead), serves)


def state(
    pool_id: str = "gpu", target: int = 0, ready: int | None = None, idle_minutes: tuple[int, ...] = ()
) -> PoolState:
    return PoolState(
        pool_id,
        NOW,
        target if ready is None else ready,
        target,
        idle_units=len(idle_minutes),
        idle_since=tuple(NOW - timedelta(minutes=m) for m in idle_minutes),
    )


def forecast(name: str, values: list[float], level: float = 0.9) -> DemandForecast:
    return DemandForecast(name, NOW, STEP, {0.5: tuple(values), level: tuple(values)}, values[0], "test")


def plan_for(
    pools: list[PoolSpec],
    states: list[PoolState],
    forecasts: dict[str, list[float]],
    observed: dict[str, float],
    memory: PlannerMemory | None = None,
    planner: PlannerSettings | None = None,
) -> CapacityPlan:
    return plan_capacity(
        PlanInput(
            now=NOW,
            tick=STEP,
            pools=pools,
            states={s.pool_id: s for s in states},
            forecasts={k: forecast(k, v) for k, v in forecasts.items()},
            observed=observed,
            service_levels=dict.fromkeys(observed, 0.9),
            settings=planner or PlannerSettings(),
            memory=memory or PlannerMemory(),
        )
    )


def test_scale_up_covers_the_forecast_peak_within_the_horizon() -> None:
    # lead 10m + tick 5m = 3 steps: the peak at step 3 counts, the one at step 5 does not.
    plan = plan_for([pool()], [state(target=2)], {"a": [10, 12, 30, 12, 90]}, {"a": 10})
    (resize,) = plan.resizes
    assert (resize.from_units, resize.to_units) == (2, 4)


def test_queued_demand_now_is_a_floor_under_the_forecast() -> None:
    plan = plan_for([pool()], [state(target=1)], {"a": [5, 5, 5]}, {"a": 41})
    assert plan.resizes[0].to_units == 6


def test_cheapest_tier_fills_first_and_overflow_spills() -> None:
    pools = [pool("ondemand", price=30.0), pool("spot", tier=CapacityTier.SPOT, price=10.0, hi=2)]
    plan = plan_for(pools, [state("ondemand"), state("spot")], {"a": [40, 40, 40]}, {"a": 40})
    assert {r.pool_id: r.to_units for r in plan.resizes} == {"spot": 2, "ondemand": 3}


def test_no_release_without_observed_idleness() -> None:
    plan = plan_for([pool()], [state(target=10)], {"a": [8, 8, 8]}, {"a": 8})
    assert not plan.resizes
    assert plan.skips[0].reason is SkipReason.NOT_IDLE


def test_release_only_units_idle_for_the_stabilization_window() -> None:
    plain = PlannerSettings(idle_hold_lead_times=0)
    plan = plan_for([pool()], [state(target=10, idle_minutes=(30, 12, 3))], {"a": [8, 8, 8]}, {"a": 8}, planner=plain)
    (resize,) = plan.resizes
    assert resize.to_units == 8  # two units idle >= 10 minutes; the third is still stabilizing
    held = plan_for([pool()], [state(target=10, idle_minutes=(30, 12, 3))], {"a": [8, 8, 8]}, {"a": 8})
    assert held.resizes[0].to_units == 9  # by default idle units are also held for two lead times (20 minutes)


def test_unknown_demand_holds_the_pool() -> None:
    plan = plan_for([pool()], [state(target=10, idle_minutes=(60, 60, 60))], {}, {})
    assert not plan.resizes
    assert plan.skips[0].reason is SkipReason.MISSING_DATA


def test_missing_forecast_still_applies_the_reactive_floor() -> None:
    plan = plan_for([pool()], [state(target=1)], {}, {"a": 30})
    assert plan.resizes[0].to_units == 4


def test_unobserved_pool_is_held() -> None:
    plan = plan_for([pool()], [], {"a": [80, 80, 80]}, {"a": 80})
    assert not plan.resizes and plan.skips[0].reason is SkipReason.MISSING_DATA


def test_backoff_sends_demand_to_the_next_eligible_pool() -> None:
    pools = [pool("spot", tier=CapacityTier.SPOT, price=4.0), pool("ondemand", price=8.0)]
    memory = PlannerMemory().back_off("spot", NOW + timedelta(minutes=5))
    plan = plan_for(pools, [state("spot", 1), state("ondemand")], {"a": [24, 24, 24]}, {"a": 24}, memory)
    assert {r.pool_id: r.to_units for r in plan.resizes} == {"ondemand": 2}


def test_blocked_pool_is_not_touched() -> None:
    memory = PlannerMemory().block("gpu", "permission denied")
    plan = plan_for([pool()], [state(target=1)], {"a": [80, 80, 80]}, {"a": 80}, memory)
    assert not plan.resizes


def test_step_limits_and_anti_flapping() -> None:
    limited = PlannerSettings(max_scale_up_units_per_tick=2, min_direction_change_interval=timedelta(minutes=30))
    plan = plan_for([pool()], [state(target=1)], {"a": [80, 80, 80]}, {"a": 80}, planner=limited)
    assert plan.resizes[0].to_units == 3
    memory = PlannerMemory().changed("gpu", NOW - timedelta(minutes=10), -1)
    plan = plan_for([pool()], [state(target=1)], {"a": [80, 80, 80]}, {"a": 80}, memory, limited)
    assert plan.skips[0].reason is SkipReason.COOLDOWN


def test_whole_slices_for_tpu_demand() -> None:
    slices = pool("slices", kind=PoolKind.TPU_SLICE_GROUP, chips=32, hi=8, serves=("a",))
    plan = plan_for([slices], [state("slices")], {"a": [33, 33, 33]}, {"a": 33})
    assert plan.resizes[0].to_units == 2


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[PoolSpec], list[PoolState], dict[str, list[float]], dict[str, float]]:
    count = draw(st.integers(1, 4))
    pools, states = [], []
    for i in range(count):
        lo = draw(st.integers(0, 3))
        hi = draw(st.integers(lo, 20))
        serves = tuple(draw(st.sets(st.sampled_from(["a", "b", "c"]), min_size=1)))
        pools.append(
            pool(
                f"p{i}",
                lo=lo,
                hi=hi,
                chips=draw(st.sampled_from([1, 4, 8, 32])),
                tier=draw(st.sampled_from(list(CapacityTier)[1:])),
                price=draw(st.floats(0.5, 50)),
                serves=serves,
            )
        )
        target = draw(st.integers(lo, hi))
        idle = tuple(draw(st.lists(st.integers(0, 60), max_size=target)))
        states.append(state(f"p{i}", target, idle_minutes=idle))
    values = st.lists(st.floats(0, 400), min_size=3, max_size=3)
    forecasts = draw(st.dictionaries(st.sampled_from(["a", "b", "c"]), values))
    observed = draw(st.dictionaries(st.sampled_from(["a", "b", "c"]), st.floats(0, 400)))
    return pools, states, forecasts, observed


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_plan_invariants(
    scenario: tuple[list[PoolSpec], list[PoolState], dict[str, list[float]], dict[str, float]],
) -> None:
    pools, states, forecasts, observed = scenario
    plan = plan_for(pools, states, forecasts, observed)
    again = plan_for(pools, states, forecasts, observed)
    assert plan == again, "same inputs must give the same plan"
    by_id = {p.pool_id: p for p in pools}
    current = {s.pool_id: s for s in states}
    known = {name for name in ("a", "b", "c") if name in forecasts and name in observed}
    for resize in plan.resizes:
        spec, st_ = by_id[resize.pool_id], current[resize.pool_id]
        assert spec.min_units <= resize.to_units <= spec.max_units, "targets within bounds"
        assert resize.from_units == st_.target_units
        if resize.to_units < resize.from_units:
            assert set(spec.serves) <= known, "no release while a served class is unknown"
            settled = sum(1 for s in st_.idle_since if NOW - s >= timedelta(minutes=10))
            assert resize.from_units - resize.to_units <= settled, "only units observed idle long enough"
    assert set(plan.decisions) == set(by_id), "every pool has a decision record"
    resized = {r.pool_id: r for r in plan.resizes}
    for pool_id, decision in plan.decisions.items():
        planned = resized.get(pool_id)
        assert planned is None or planned.reason == decision.why(), "the reason is rendered from the record"
        expected = planned.to_units if planned is not None else current[pool_id].target_units
        assert decision.target_units == expected, "the record's target is what is carried out"
        spec = by_id[pool_id]
        assert spec.min_units <= decision.bounded_units <= spec.max_units


def test_classes_sharing_their_pools_are_planned_on_their_summed_forecast() -> None:
    shared = pool(serves=("a", "b"))
    groups = demand_groups(["a", "b"], [shared])
    (group,) = groups
    assert group.is_aggregate
    forecasts = {
        "a": forecast("a", [30, 30, 30]),
        "b": forecast("b", [30, 30, 30]),
        group.name: forecast(group.name, [41, 41, 41]),
    }
    plan = plan_capacity(
        PlanInput(
            now=NOW,
            tick=STEP,
            pools=[shared],
            states={"gpu": state(target=0)},
            forecasts=forecasts,
            observed={"a": 20, "b": 20},
            service_levels={"a": 0.9, "b": 0.9},
            settings=PlannerSettings(),
            groups=groups,
            forecast_step=STEP,
        )
    )
    assert plan.resizes[0].to_units == 6  # ceil(41 / 8), not ceil(60 / 8)


def test_idle_units_are_held_for_a_multiple_of_the_lead_time() -> None:
    slow = pool(lead=20)
    idle = state(target=10, idle_minutes=(40, 30, 15))
    plan = plan_for([slow], [idle], {"a": [8, 8, 8]}, {"a": 8})
    assert plan.resizes[0].to_units == 9  # two lead times: only the unit idle for 40 minutes goes
    plain = PlannerSettings(idle_hold_lead_times=0)
    plan = plan_for([slow], [idle], {"a": [8, 8, 8]}, {"a": 8}, planner=plain)
    assert plan.resizes[0].to_units == 7  # all three have been idle for 10 minutes


def test_spot_pools_hold_a_reserve_for_interruptions() -> None:
    spot = PoolSpec(
        "spot",
        PoolKind.GPU_NODE_POOL,
        CapacityTier.SPOT,
        AcceleratorFamily.GPU,
        8,
        0,
        100,
        3.0,
        timedelta(minutes=30),
        ("a",),
        spot_interruption_per_hour=0.2,
    )
    plan = plan_for([spot], [state("spot")], {"a": [80, 80, 80]}, {"a": 80})
    assert plan.resizes[0].to_units == 11  # 10 units + ceil(10 * 0.2/h * 0.5 h)


def test_constant_headroom_applies_even_without_demand() -> None:
    plan = plan_for([pool()], [state(target=0)], {"a": [0, 0, 0]}, {"a": 0}, planner=PlannerSettings(headroom_units=2))
    assert plan.resizes[0].to_units == 2


def spot_pool(hi: int) -> PoolSpec:
    """A spot pool losing half a unit per unit-hour, with a 30-minute lead: a reserve of 1 unit per 4."""
    return PoolSpec(
        "spot",
        PoolKind.GPU_NODE_POOL,
        CapacityTier.SPOT,
        AcceleratorFamily.GPU,
        8,
        0,
        hi,
        3.0,
        timedelta(minutes=30),
        ("a",),
        spot_interruption_per_hour=0.5,
    )


def test_a_spot_reserve_cut_by_max_units_is_held_by_the_next_eligible_pool() -> None:
    # 32 chips fill the spot pool's 4 units exactly; its reserve of 1 unit does not fit, so on-demand holds it.
    pools = [spot_pool(4), pool("ondemand", price=30.0)]
    plan = plan_for(pools, [state("spot"), state("ondemand")], {"a": [32, 32, 32]}, {"a": 32})
    assert {r.pool_id: r.to_units for r in plan.resizes} == {"spot": 4, "ondemand": 1}
    spot, ondemand = plan.decisions["spot"], plan.decisions["ondemand"]
    assert (spot.spot_reserve_units, spot.bounded_units) == (1, 4)
    assert ondemand.carried_reserve_units == 1 and ondemand.need_chips == 0
    assert "8 chips of spot reserve over the bound held in ondemand" in spot.why()
    assert "+ 1 for the spot reserve of spot = 1" in ondemand.why()
    # With room in the spot pool the reserve stays there; with no other pool it is recorded as not held.
    roomy = plan_for([spot_pool(8), pool("ondemand", price=30.0)], [state("spot"), state("ondemand")],
                     {"a": [32, 32, 32]}, {"a": 32})  # fmt: skip
    assert {r.pool_id: r.to_units for r in roomy.resizes} == {"spot": 5}
    alone = plan_for([spot_pool(4)], [state("spot")], {"a": [32, 32, 32]}, {"a": 32})
    assert alone.targets == {"spot": 4}
    assert "8 chips of spot reserve over the bound not held: no eligible pool has room" in alone.decisions["spot"].why()


def test_demand_only_one_pool_can_serve_is_not_crowded_out_by_a_group_named_before_it() -> None:
    # Spot (4 units) may serve a, b and z; on-demand only a and b. The group a+b is served before z (by name) and
    # could fill the spot pool alone, but on-demand takes what z needs the spot pool for.
    spot = pool("spot", tier=CapacityTier.SPOT, price=10.0, hi=4, serves=("a", "b", "z"))
    ondemand = pool("ondemand", price=30.0, serves=("a", "b"))
    pools = [spot, ondemand]
    groups = demand_groups(["a", "b", "z"], pools)
    given_ = PlanInput(
        now=NOW, tick=STEP, pools=pools, states={"spot": state("spot"), "ondemand": state("ondemand")},
        forecasts={n: forecast(n, [16, 16, 16]) for n in ("a", "b", "z")}
        | {"pool-group:ondemand+spot": forecast("pool-group:ondemand+spot", [32, 32, 32])},
        observed={"a": 16, "b": 16, "z": 16}, service_levels=dict.fromkeys("abz", 0.9), settings=PlannerSettings(),
        groups=groups,
    )  # fmt: skip
    plan = plan_capacity(given_)
    assert plan.targets == {"spot": 4, "ondemand": 2}
    assert {s.demand: s.chips for s in plan.decisions["spot"].demand} == {"pool-group:ondemand+spot": 16, "z": 16}
    assert not plan.decisions["spot"].unplaced
    # With z's demand beyond what the spot pool can hold, what no pool can take is in the records.
    more = plan_capacity(replace(given_, observed={"a": 16, "b": 16, "z": 40}))
    (left,) = more.decisions["spot"].unplaced
    assert (left.demand, left.chips, left.need) == ("z", 8, 40)
    assert "no pool that may serve it has room for 8 of 40 chips of z" in more.decisions["spot"].why()
    assert not more.decisions["ondemand"].unplaced
