"""Demand that busy units already run is not bought again: running work stays where it runs, so a cheaper pool that
could take it (back from a back-off, unblocked, its bound raised) grows only for the demand they do not serve."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.planning import PlanInput, PlannerMemory, plan_capacity
from config.schema import PlannerSettings
from models import AcceleratorFamily, CapacityPlan, CapacityTier, DemandForecast, PoolKind, PoolSpec, PoolState
from models.allocation import allocate

NOW = datetime(2024, 1, 1, 12, tzinfo=UTC)
STEP = timedelta(minutes=5)
HOUR_AGO = NOW - timedelta(hours=1)


def pool(
    pool_id: str, tier: CapacityTier, price: float, hi: int = 10, serves: tuple[str, ...] = ("train",)
) -> PoolSpec:
    interruptions = 0.5 if tier is CapacityTier.SPOT else 0.0
    return PoolSpec(pool_id, PoolKind.GPU_NODE_POOL, tier, AcceleratorFamily.GPU, 8, 0, hi, price,
                    timedelta(minutes=10), serves, spot_interruption_per_hour=interruptions)  # fmt: skip


SPOT = pool("spot", CapacityTier.SPOT, 5.0)  # 8-chip units; 0.5 reclaims per unit-hour over 10 min: 1 unit of reserve
OD = pool("od", CapacityTier.ON_DEMAND, 10.0)


def busy(pool_id: str, units: int, idle: int = 0) -> PoolState:
    """``units`` ready, ``idle`` of them idle for an hour (named), the rest running work."""
    names = tuple(f"{pool_id}-{i}" for i in range(idle))
    return PoolState(pool_id, NOW, units, units, idle_units=idle, idle_since=(HOUR_AGO,) * idle, idle_nodes=names)


def plan(
    pools: list[PoolSpec], states: list[PoolState], chips: float, memory: PlannerMemory | None = None
) -> CapacityPlan:
    forecast = DemandForecast("train", NOW, STEP, {0.5: (chips,) * 14, 0.9: (chips,) * 14}, chips, "test")
    return plan_capacity(PlanInput(NOW, STEP, pools, {s.pool_id: s for s in states}, {"train": forecast},
                                   {"train": chips}, {"train": 0.9}, PlannerSettings(),
                                   memory=memory or PlannerMemory()))  # fmt: skip


def resizes(out: CapacityPlan) -> list[tuple[str, int, int]]:
    return [(r.pool_id, r.from_units, r.to_units) for r in out.resizes]


def test_busy_units_of_a_dearer_pool_are_not_bought_again_in_a_cheaper_one() -> None:
    # spot was backed off after a stockout, so on-demand took the 40 chips: 0 -> 5 units
    memory = PlannerMemory()
    memory.backoff_until["spot"] = NOW + timedelta(minutes=10)
    assert resizes(plan([SPOT, OD], [busy("spot", 0), busy("od", 0)], 40.0, memory)) == [("od", 0, 5)]
    # the back-off is over; on-demand's 5 units run the 40 chips: spot was grown 0 -> 6 for them (11 units billed)
    out = plan([SPOT, OD], [busy("spot", 0), busy("od", 5)], 40.0)
    assert resizes(out) == []
    assert out.decisions["od"].why().startswith("need 40 chips"), out.decisions["od"].why()
    assert out.decisions["spot"].why().startswith("no demand assigned"), out.decisions["spot"].why()


def test_idle_units_holding_demand_that_busy_units_elsewhere_serve_are_released() -> None:
    # spot's 6 units idle for an hour while on-demand's 5 run the 40 chips: nothing was released before
    out = plan([SPOT, OD], [busy("spot", 6, idle=6), busy("od", 5)], 40.0)
    assert resizes(out) == [("spot", 6, 0)]
    assert sorted(d.node for d in out.drains) == [f"spot-{i}" for i in range(6)]
    assert "no demand assigned" not in out.decisions["od"].why(), out.decisions["od"].why()


def test_the_cheaper_pool_takes_the_demand_as_the_dearer_pools_units_go_idle() -> None:
    # 2 of on-demand's 5 units went idle: their 16 chips go to spot (2 units and 1 of reserve), on-demand releases 2
    out = plan([SPOT, OD], [busy("spot", 0), busy("od", 5, idle=2)], 40.0)
    assert sorted(resizes(out)) == [("od", 5, 3), ("spot", 0, 3)]


def test_only_demand_beyond_what_busy_units_run_is_bought() -> None:
    out = plan([SPOT, OD], [busy("spot", 0), busy("od", 5)], 56.0)  # 16 chips more than on-demand runs
    assert resizes(out) == [("spot", 0, 3)]


def test_a_raised_bound_does_not_buy_again_what_the_dearer_pool_runs() -> None:
    # spot at its bound of 2 when the work came, on-demand running the other 24 chips; the bound is raised to 10
    out = plan([SPOT, OD], [busy("spot", 2), busy("od", 3)], 40.0)
    assert resizes(out) == [("spot", 2, 3)]  # the reserve of its own 2 units only; 2 -> 6 before


def test_busy_chips_go_to_the_classes_first_and_a_class_only_one_pool_serves_still_gets_its_room() -> None:
    spot = pool("spot", CapacityTier.SPOT, 5.0, hi=4, serves=("x",))
    od = pool("od", CapacityTier.ON_DEMAND, 10.0, hi=4, serves=("x", "y"))
    # od's 24 busy chips: x takes them (served first by name), the rest of x goes cheapest first
    assigned = allocate({"x": 40.0}, [spot, od], {"spot": 32.0, "od": 32.0}, held={"od": 24.0})
    assert assigned == {"spot": {"x": 16.0}, "od": {"x": 24.0}}
    # y can only use od: x's held chips make way for it where x has room elsewhere
    assigned = allocate({"x": 24.0, "y": 32.0}, [spot, od], {"spot": 32.0, "od": 32.0}, held={"od": 24.0})
    assert assigned == {"spot": {"x": 24.0}, "od": {"y": 32.0}}


def test_a_busy_pool_left_without_demand_says_where_the_demand_went() -> None:
    # both pools' 5 units busy for 40 chips: the cheaper one's units are given them; on-demand's go as they fall idle
    out = plan([SPOT, OD], [busy("spot", 5), busy("od", 5)], 40.0)
    hold = next(s for s in out.skips if s.pool_id == "od")
    assert hold.detail == (
        "forecast allows 0 units but no unit is idle; the demand it may serve is placed on spot (train: 40 chips): "
        "its units go as they fall idle"
    )
    assert hold.detail in out.decisions["od"].why()


def test_on_prem_pools_keep_their_own_demand_before_busy_cloud_units_take_any() -> None:
    # each tenant's on-prem pool holds 32 chips; b's 16 above it run on spot's 2 busy units
    onprem = [
        PoolSpec(
            f"onprem-{c}",
            PoolKind.ON_PREM,
            CapacityTier.ON_PREM,
            AcceleratorFamily.GPU,
            8,
            4,
            4,
            0.0,
            timedelta(0),
            (c,),
        )
        for c in ("a", "b")
    ]
    spot = pool("spot", CapacityTier.SPOT, 5.0, serves=("a", "b"))
    forecasts = {c: DemandForecast(c, NOW, STEP, {0.9: (v,) * 14}, v, "test") for c, v in (("a", 32.0), ("b", 48.0))}
    given = PlanInput(NOW, STEP, [*onprem, spot], {"spot": busy("spot", 2)}, forecasts, {"a": 32.0, "b": 48.0},
                      {"a": 0.9, "b": 0.9}, PlannerSettings())  # fmt: skip
    out = plan_capacity(given)
    # spot keeps b's 16 chips (and 1 unit of reserve); had its busy chips gone to a, a's on-prem room would have been
    # left unused and b's 16 bought again: 2 -> 5
    assert resizes(out) == [("spot", 2, 3)], out.decisions["spot"].why()
    assert [(s.demand, s.chips) for s in out.decisions["spot"].demand] == [("b", 16.0)]
