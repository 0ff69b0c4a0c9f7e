"""Value-aware burst budgets: shared pools serve the dearest waiting first, a paced budget funds classes by
waiting cost from a profile of their burst need and never spends over its cap at any step, the reactive burst
spends the same cap first-come, and the configuration names what is wrong."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from actuators.simulated import SimulatedCluster
from agent.burst_history import burst_profile
from agent.planning import PlanInput, plan_capacity
from agent.planning.budget import Budget, BudgetSpend
from agent.planning.groups import single_class_groups
from agent.planning.pacing import BurstProfile, funded_shares, pace_needs
from agent.report.hybrid import hybrid_section
from agent.simulation import select_window
from agent.simulation.budgets import budget_usage
from agent.simulation.first_come import FirstComeCaps
from agent.simulation.hybrid import BASELINE, hybrid_summary
from agent.simulation.runner import run_policy
from agent.sources.trace import read_trace
from config import settings_from_mapping
from config.schema import PlannerSettings
from models import AcceleratorFamily, CapacityTier, ConfigError, DemandForecast, PoolKind, PoolSpec, PoolState
from models.allocation import allocate, unassigned
from models.clock import SimulatedClock
from tests.hybrid_capped_runs import HYBRID_CAPPED_GROUP, capped_runs

# the paced budget's runs are those of every test of the hybrid fleet under that cap, computed once on one worker
pytestmark = pytest.mark.xdist_group(HYBRID_CAPPED_GROUP)

NOW = datetime(2024, 1, 10, 6, 30, tzinfo=UTC)
STEP = timedelta(minutes=5)


def spec(pool_id: str, serves: tuple[str, ...], units: int, kind: PoolKind = PoolKind.GPU_NODE_POOL) -> PoolSpec:
    tier = CapacityTier.ON_PREM if kind is PoolKind.ON_PREM else CapacityTier.SPOT
    price = 0.0 if kind is PoolKind.ON_PREM else 8.0
    return PoolSpec(pool_id, kind, tier, AcceleratorFamily.GPU, 8, 0, units, price, timedelta(minutes=10), serves)


# -- priority in shared pools ----------------------------------------------------------------------------------


def test_a_shared_pool_that_cannot_serve_everyone_serves_the_dearest_waiting_first() -> None:
    shared = spec("spot", ("a", "b"), 2)
    demand = {"a": 12.0, "b": 10.0}
    # 16 chips for 22 wanted: b waits at 4 USD per accelerator-hour, a at 1, so b is served whole, a gets 6.
    assigned = allocate(demand, [shared], {"spot": 16.0}, priority={"a": 1.0, "b": 4.0})
    assert assigned["spot"] == {"b": 10.0, "a": 6.0}
    assert unassigned(demand, assigned) == {"a": 6.0, "b": 0.0}
    # Equal costs (or none): as before, by name.
    assert allocate(demand, [shared], {"spot": 16.0}, priority={"a": 1.0, "b": 1.0})["spot"] == {"a": 12.0, "b": 4.0}
    assert allocate(demand, [shared], {"spot": 16.0})["spot"] == {"a": 12.0, "b": 4.0}


def test_the_simulated_cluster_serves_the_dearest_waiting_first() -> None:
    clock = SimulatedClock(NOW)
    cluster = SimulatedCluster([spec("spot", ("a", "b"), 2)], clock, {"spot": 2}, waiting_costs={"b": 4.0})
    outcome = cluster.serve(NOW, {"a": 12.0, "b": 10.0})
    assert outcome.unserved == {"a": 6.0, "b": 0.0}


def test_the_planner_gives_a_full_shared_pool_to_the_dearest_class_first() -> None:
    # Spot (2 units) serves a and b; on-demand serves only a. With b dearer, b takes the spot pool and a spills to
    # on-demand (2 units). By name, a is served first and takes the spot pool, then moves to on-demand to make way
    # for b, which only the spot pool can serve: the same targets, not b left without a pool.
    spot = spec("spot", ("a", "b"), 2)
    ondemand = PoolSpec(
        "ondemand", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 10, 30.0,
        timedelta(minutes=10), ("a",),
    )  # fmt: skip
    states = {p: PoolState(p, NOW, 0, 0) for p in ("spot", "ondemand")}
    forecasts = {n: DemandForecast(n, NOW, STEP, {0.9: (16.0, 16.0, 16.0)}, 16.0, "test") for n in ("a", "b")}

    def targets(costs: dict[str, float]) -> dict[str, int]:
        given = PlanInput(
            now=NOW, tick=STEP, pools=[spot, ondemand], states=states, forecasts=forecasts,
            observed={"a": 16.0, "b": 16.0}, service_levels={"a": 0.9, "b": 0.9}, settings=PlannerSettings(),
            waiting_costs=costs,
        )  # fmt: skip
        return plan_capacity(given).targets

    assert targets({"a": 1.0, "b": 4.0}) == {"spot": 2, "ondemand": 2}
    assert targets({}) == {"spot": 2, "ondemand": 2}


# -- pacing ------------------------------------------------------------------------------------------------------


def test_a_profile_sums_the_hours_left_from_the_hour_of_day() -> None:
    profile = BurstProfile({"a": tuple(float(h) for h in range(24))})
    # From 06:30 to 09:00: half of hour 6, then hours 7 and 8.
    assert profile.remaining("a", NOW, NOW.replace(hour=9, minute=0)) == pytest.approx(3.0 + 7.0 + 8.0)
    # Two whole days more: each adds the sum of the day (276).
    end = NOW.replace(hour=9, minute=0) + timedelta(days=2)
    assert profile.remaining("a", NOW, end) == pytest.approx(18.0 + 2 * 276.0)
    with pytest.raises(ValueError, match="burst profile of 'a'"):
        BurstProfile({"a": (1.0,) * 23})


def test_a_falling_burst_need_is_profiled_near_its_recent_level() -> None:
    pools = [spec("onprem-a", ("a",), 1, PoolKind.ON_PREM), spec("spot", ("a",), 10)]
    groups = single_class_groups(["a"], pools)
    # Two days, hourly: the first bursts 10 chips above the 8 on prem in every hour, the second not at all. The
    # newest step weighs 1 and a step a day older 1/2 (a half-life of one day), so each hour of the day is
    # (10 x 1/2 + 0 x 1) / (1/2 + 1) = 10/3, not the unweighted 5: pacing does not ration today for a need past.
    stamps = pd.date_range("2024-01-01", periods=48, freq="h", tz="UTC")
    demand = [18.0] * 24 + [8.0] * 24
    history = pd.DataFrame({"unique_id": "a", "ds": stamps, "y": demand})
    profile = burst_profile(history, groups, {p.pool_id: p for p in pools})
    assert profile.hourly_chips["a"] == pytest.approx((10.0 / 3.0,) * 24)
    # A step with no value counts nothing (never as zero demand): without the second day's 05:00, that hour of the
    # day is the first day's alone.
    gap = history.assign(y=[*demand[:29], float("nan"), *demand[30:]])
    assert burst_profile(gap, groups, {p.pool_id: p for p in pools}).hourly_chips["a"][5] == pytest.approx(10.0)


def test_scarce_money_funds_the_dearest_waiting_first_and_the_next_in_part() -> None:
    remaining = {"a": 100.0, "b": 60.0, "c": 50.0}
    costs = {"a": 1.0, "b": 4.0, "c": 4.0}
    # b and c (4 USD) first: 60 + 50 = 110 of 130; a gets the 20 left of its 100.
    assert funded_shares(remaining, 130.0, costs) == {"b": 1.0, "c": 1.0, "a": pytest.approx(0.2)}
    assert funded_shares(remaining, 1000.0, costs) == {"b": 1.0, "c": 1.0, "a": 1.0}
    assert funded_shares(remaining, -5.0, costs) == {"b": 0.0, "c": 0.0, "a": 0.0}


def test_groups_whose_waiting_costs_the_same_share_scarce_money_alike_whatever_their_names() -> None:
    remaining = {"a": 100.0, "b": 60.0, "c": 40.0}
    costs = {"a": 4.0, "b": 1.0, "c": 1.0}
    # a first (100 of 150); b and c share the 50 left of their 100 alike: half of each one's need.
    assert funded_shares(remaining, 150.0, costs) == {"a": 1.0, "b": pytest.approx(0.5), "c": pytest.approx(0.5)}
    renamed = {"z": 60.0, "c": 40.0, "a": 100.0}
    assert funded_shares(renamed, 150.0, {"a": 4.0, "z": 1.0, "c": 1.0})["z"] == pytest.approx(0.5)


def test_pacing_trims_the_burst_need_of_the_cheapest_waiting_and_keeps_on_prem() -> None:
    pools = [
        spec("onprem-a", ("a",), 1, PoolKind.ON_PREM),
        spec("onprem-b", ("b",), 1, PoolKind.ON_PREM),
        spec("spot", ("a", "b"), 10),
    ]
    groups = single_class_groups(["a", "b"], pools)
    # The month period (UTC, from the 1st) ends on 1 February: 25.5 days after NOW. Each class bursts 8 chips in
    # every hour of its profile: 8 x 612 = 4,896 accelerator-hours each, at 1 USD per chip-hour.
    profile = BurstProfile({"a": (8.0,) * 24, "b": (8.0,) * 24})
    hours_left = (datetime(2024, 2, 1, tzinfo=UTC) - NOW) / timedelta(hours=1)
    need = 8.0 * hours_left
    budget = Budget("burst", frozenset({"spot"}), monthly_cap_usd=1000.0 + need * 1.5, pacing="forecast")
    spend = BudgetSpend(budget, NOW, spent_period_usd=1000.0, spent_hour_usd=0.0)
    needs = {"a": 24.0, "b": 24.0}  # 8 on-prem + 16 burst each
    paced = pace_needs(NOW, pools, groups, needs, [spend], profile, {"a": 1.0, "b": 4.0})
    # Money left: 1.5 x one class's need: b whole, a half its burst.
    assert paced == {"b": 24.0, "a": pytest.approx(8.0 + 16.0 * 0.5)}
    # Unpaced budgets, or no profile (no history yet), trim nothing here (the cap still holds in enforcement).
    unpaced = BudgetSpend(Budget("burst", frozenset({"spot"}), monthly_cap_usd=10.0), NOW, 1000.0, 0.0)
    assert pace_needs(NOW, pools, groups, needs, [unpaced], profile, {"b": 4.0}) == needs
    assert pace_needs(NOW, pools, groups, needs, [spend], None, {"b": 4.0}) == needs
    assert pace_needs(NOW, pools, groups, needs, [spend], BurstProfile({"a": (8.0,) * 24}), {"b": 4.0}) == needs


def test_the_plan_records_what_pacing_funded() -> None:
    pools = [spec("onprem-a", ("a",), 1, PoolKind.ON_PREM), spec("spot", ("a",), 10)]
    hours_left = (datetime(2024, 2, 1, tzinfo=UTC) - NOW) / timedelta(hours=1)
    # Money for a quarter of a's remaining burst need (32 chips every hour at 1 USD per chip-hour): one unit to
    # the end of the period, which is also all the cap's own guard allows.
    budget = Budget("burst", frozenset({"spot"}), monthly_cap_usd=32.0 * hours_left / 4, pacing="forecast")
    given = PlanInput(
        now=NOW, tick=STEP, pools=pools, states={p.pool_id: PoolState(p.pool_id, NOW, 0, 0) for p in pools},
        forecasts={"a": DemandForecast("a", NOW, STEP, {0.9: (40.0, 40.0, 40.0)}, 40.0, "test")},
        observed={"a": 40.0}, service_levels={"a": 0.9}, settings=PlannerSettings(),
        budgets=[BudgetSpend(budget, NOW, 0.0, 0.0)], burst_profile=BurstProfile({"a": (32.0,) * 24}),
    )  # fmt: skip
    plan = plan_capacity(given)
    # Need 40 = 8 on-prem + 32 burst; a quarter of the burst is funded: 8 + 8 = 16 chips, 1 spot unit.
    assert plan.targets["spot"] == 1
    assert "budget pacing funds 16 of 40" in plan.decisions["spot"].why()


# -- first-come under the cap -----------------------------------------------------------------------------------


def test_first_come_spends_until_the_cap_then_cuts_busy_units_too() -> None:
    clock = SimulatedClock(NOW)
    pool = spec("spot", ("a",), 4)
    cluster = SimulatedCluster([pool], clock, {"spot": 2})
    caps = FirstComeCaps([Budget("burst", frozenset({"spot"}), monthly_cap_usd=40.0)], [pool])
    # 2 units at 8 USD an hour, hourly steps: 16, then 32; the third hour would reach 48 > 40: one unit fits (40).
    for expected in (2, 2, 1, 0):
        caps.hold(NOW, cluster, 1.0)
        assert cluster.paid_units() == {"spot": expected}
    # A new month period opens: the money is back.
    cluster.resize("spot", 3, "up")
    caps.hold(datetime(2024, 2, 1, tzinfo=UTC), cluster, 1.0)
    assert cluster.paid_units() == {"spot": 3}


# -- a paced budget on a hand-made hybrid fleet ------------------------------------------------------------------

DAYS = 2


def hybrid(tmp_path: Path, budgets: list[dict[str, Any]], costs: dict[str, float]) -> tuple[Any, Any, Any]:
    """Two tenants with one on-prem node each; a bursts in the working day, b in the evening (5-minute steps,
    one day of history, one day simulated)."""
    stamps = pd.date_range("2024-01-01T00:00:00+00:00", periods=DAYS * 288, freq="5min")
    hours = stamps.hour.to_numpy()
    demand = {
        "a": np.where((hours >= 8) & (hours < 16), 22.0, 6.0),
        "b": np.where((hours >= 14) & (hours < 22), 20.0, 5.0),
    }
    rows = pd.concat(
        pd.DataFrame({"unique_id": n, "ds": stamps.strftime("%Y-%m-%dT%H:%M:%S%z"), "y": v}) for n, v in demand.items()
    )
    path = tmp_path / "trace.csv"
    rows.to_csv(path, index=False)
    onprem = [
        {"id": f"onprem-{n}", "kind": "on-prem", "tier": "on-prem", "chips_per_unit": 8, "min_units": 1,
         "max_units": 1, "price_per_chip_hour_usd": 0.0, "lead_time": "0s", "serves": [n]}
        for n in demand
    ]  # fmt: skip
    spot = {"id": "spot", "kind": "gpu-node-pool", "tier": "spot", "chips_per_unit": 8, "max_units": 6,
            "price_per_unit_hour_usd": 8.0, "lead_time": "10m", "serves": list(demand)}  # fmt: skip
    raw = {
        "demand_classes": [{"name": n, "waiting_cost_per_accelerator_hour_usd": costs[n]} for n in demand],
        "pools": [*onprem, spot],
        "forecast": {"model": "last-value", "history": "1d"},
        "budgets": budgets,
    }
    settings = settings_from_mapping(raw, source="hybrid.yaml")
    window = select_window(read_trace(path), settings.demand_class_models(), stamps[288], None)
    return settings, read_trace(path), window


def test_a_paced_budget_never_spends_over_its_cap_at_any_step(tmp_path_factory: pytest.TempPathFactory) -> None:
    # The month period ends where the window ends (periods open on the 3rd, UTC): the cap is the day's budget, a
    # paced 150 USD (``hybrid_capped_runs.BUDGET``), with b's waiting dearer than a's.
    fleet = capped_runs(tmp_path_factory)
    settings, window = fleet.settings, fleet.window
    (capped,) = settings.budgets
    assert (capped.monthly_cap_usd, capped.pacing) == (150.0, "forecast")
    runs = {name: fleet.runs[name] for name in ("forecast", "reactive")}
    for name, run in runs.items():
        (usage,) = budget_usage(settings, window, run)
        assert (usage.period_spend <= 150.0 + 1e-6).all(), name
        assert usage.period_spend[-1] > 0.0, name
    # First-come: the reactive burst spends the whole cap, then nothing.
    (reactive,) = budget_usage(settings, window, runs["reactive"])
    assert reactive.period_spend[-1] == pytest.approx(150.0)
    summary = hybrid_summary(settings.pool_specs(), window, runs, settings.waiting_costs(), {
        name: budget_usage(settings, window, run) for name, run in runs.items()
    })  # fmt: skip
    for name in runs:
        caps = summary["rows"][name]["monthly_caps"]["burst"]
        assert caps["within_cap"] is True and caps["peak_spent_usd"] <= 150.0
    ratio = summary["avoided_waiting_cost_forecast_over_reactive"]
    forecast, reactive_row = summary["rows"]["forecast"], summary["rows"]["reactive"]
    assert ratio == pytest.approx(
        forecast["avoided_waiting_cost_usd"] / reactive_row["avoided_waiting_cost_usd"], abs=1e-4
    )
    # First-come spends the cap on a's morning burst; paced, it is kept for b's dearer evening one.
    assert ratio > 1.0
    page = hybrid_section(summary)
    assert "peak spend (USD)" in page and f"{ratio:.3f}x" in page and "avoided waiting cost (USD)" in page


def test_a_hard_stop_holds_the_cap_at_every_step_by_releasing_busy_units(tmp_path: Path) -> None:
    # A cap too small for the day's bursts, counted only an hour ahead: the money runs out while units are busy,
    # and the hard stop releases them before the cap breaks. The default guard at the same cap never has to.
    budget = {"name": "burst", "pools": ["spot"], "monthly_cap_usd": 40.0, "period_start_day": 3,
              "pacing": "forecast"}  # fmt: skip
    runs = {}
    for horizon in (None, "1h"):
        settings, trace, window = hybrid(tmp_path, [{**budget, "commit_horizon": horizon}], {"a": 1.0, "b": 4.0})
        run = runs[horizon] = run_policy(settings, trace, window, "forecast")
        (usage,) = budget_usage(settings, window, run)
        assert (usage.period_spend <= 40.0 + 1e-6).all(), horizon
    assert runs["1h"].forced_release_units > 0
    assert runs[None].forced_release_units == 0
    usages = {"forecast": budget_usage(settings, window, runs["1h"])}
    summary = hybrid_summary(settings.pool_specs(), window, {"forecast": runs["1h"]}, settings.waiting_costs(), usages)
    assert summary["rows"]["forecast"]["hard_stop_released_units"] == runs["1h"].forced_release_units
    assert "units released by a hard stop" in hybrid_section(summary)
    assert runs["1h"].unserved_accelerator_hours < runs[None].unserved_accelerator_hours


def test_avoided_waiting_cost_per_class_is_each_class_cost_times_the_hours_it_no_longer_waits(
    tmp_path: Path,
) -> None:
    settings, trace, window = hybrid(tmp_path, [], {"a": 1.0, "b": 4.0})
    run = run_policy(settings, trace, window, "oracle")
    rows = hybrid_summary(settings.pool_specs(), window, {"oracle": run}, settings.waiting_costs())["rows"]
    # On-prem only, a waits 22 - 8 = 14 chips for 8 hours (112) and b 20 - 8 = 12 for 8 hours (96).
    assert rows[BASELINE]["queued_accelerator_hours_by_class"] == {"a": 112.0, "b": 96.0}
    left = rows["oracle"]["queued_accelerator_hours_by_class"]
    by_class = rows["oracle"]["avoided_waiting_cost_by_class_usd"]
    assert by_class == {"a": pytest.approx((112.0 - left["a"]) * 1.0), "b": pytest.approx((96.0 - left["b"]) * 4.0)}
    assert rows["oracle"]["avoided_waiting_cost_usd"] == pytest.approx(sum(by_class.values()), abs=0.02)


# -- configuration --------------------------------------------------------------------------------------------


def test_pacing_errors_name_the_budget_key() -> None:
    pools = [
        {"id": "onprem", "kind": "on-prem", "tier": "on-prem", "chips_per_unit": 8, "min_units": 1, "max_units": 1,
         "price_per_chip_hour_usd": 0.0, "lead_time": "0s", "serves": ["a"]},
        {"id": "spot", "kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 2, "price_per_chip_hour_usd": 1.0,
         "lead_time": "10m", "serves": ["a"]},
    ]  # fmt: skip

    def problems(budget: dict[str, Any]) -> list[str]:
        raw = {"demand_classes": [{"name": "a"}], "pools": pools, "budgets": [budget]}
        with pytest.raises(ConfigError) as caught:
            settings_from_mapping(raw, source="test.yaml")
        return [str(p) for p in caught.value.problems]

    hourly = {"name": "b", "pools": ["spot"], "hourly_cap_usd": 10.0, "pacing": "forecast"}
    assert problems(hourly) == ["budgets[0].pacing: pacing 'forecast' spends a monthly cap: set monthly_cap_usd"]
    onprem = {"name": "b", "pools": ["onprem"], "monthly_cap_usd": 10.0, "pacing": "forecast"}
    assert problems(onprem) == ["budgets[0].pacing: pacing 'forecast' needs a priced cloud pool in pools"]
    short = {"name": "b", "pools": ["spot"], "monthly_cap_usd": 10.0, "commit_horizon": "90s"}
    assert problems(short) == [
        "budgets[0].commit_horizon: must be at least two ticks (2m): the hard stop releases units two ticks before "
        "the money runs out"
    ]
    uncapped = {"name": "b", "pools": ["spot"], "hourly_cap_usd": 10.0, "commit_horizon": "1h"}
    assert problems(uncapped) == [
        "budgets[0].commit_horizon: a commit horizon holds a monthly cap: set monthly_cap_usd"
    ]
    (typo,) = problems({"name": "b", "pools": ["spot"], "monthly_cap_usd": 10.0, "pacing": "forecasts"})
    assert typo.startswith("budgets[0].pacing") and "'none'" in typo and "'forecast'" in typo
