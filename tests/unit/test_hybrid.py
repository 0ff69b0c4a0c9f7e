"""The hybrid-fleet figures (queued accelerator-hours against the on-prem-only baseline, on-prem utilization,
burst spend, dollars per avoided queued accelerator-hour) on a hand-made trace worked out by hand, and the
hybrid reference scenario against the trace it models."""

from __future__ import annotations

import gzip
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import pytest

from agent.report.hybrid import hybrid_section
from agent.simulation import select_window
from agent.simulation.hybrid import BASELINE, hybrid_summary
from agent.simulation.results import results_document
from agent.simulation.runner import run_policy
from agent.sources.trace import read_trace
from config import load_settings, settings_from_mapping
from models import PoolKind

ROOT = Path(__file__).resolve().parents[2]
START = datetime.fromisoformat("2024-01-01T00:00:00+00:00")
END = datetime.fromisoformat("2024-01-01T06:00:00+00:00")

# Hourly steps. Each tenant owns one on-prem node of 8 chips. Step 2 has no value for tenant a (a gap).
DEMAND: dict[str, list[int | None]] = {"a": [8, 12, None, 20, 8, 4], "b": [4, 4, 4, 10, 8, 4]}


def hand_made(tmp_path: Path) -> tuple[Any, Any, Any]:
    rows = [
        {"unique_id": name, "ds": f"2024-01-01T{t:02d}:00:00+00:00", "y": y}
        for name, values in DEMAND.items()
        for t, y in enumerate(values)
        if y is not None
    ]
    path = tmp_path / "trace.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    onprem = [
        {
            "id": f"onprem-{name}",
            "kind": "on-prem",
            "tier": "on-prem",
            "chips_per_unit": 8,
            "min_units": 1,
            "max_units": 1,
            "price_per_chip_hour_usd": 0.0,
            "lead_time": "0s",
            "serves": [name],
        }
        for name in DEMAND
    ]
    burst = {
        "id": "burst",
        "kind": "gpu-node-pool",
        "chips_per_unit": 8,
        "max_units": 4,
        "price_per_unit_hour_usd": 8.0,
        "lead_time": "1h",
        "serves": list(DEMAND),
    }
    raw = {"demand_classes": [{"name": n} for n in DEMAND], "pools": [*onprem, burst]}
    settings = settings_from_mapping(raw, source="hybrid.yaml")
    trace = read_trace(path)
    window = select_window(trace, settings.demand_class_models(), START, END)
    return settings, trace, window


def test_hybrid_figures_on_a_hand_made_trace(tmp_path: Path) -> None:
    settings, trace, window = hand_made(tmp_path)
    oracle = run_policy(settings, trace, window, "oracle")
    summary = hybrid_summary(settings.pool_specs(), window, {"oracle": oracle})
    base, row = summary["rows"][BASELINE], summary["rows"]["oracle"]

    # On-prem only: a waits 12-8=4 at step 1 and 20-8=12 at step 3; b waits 10-8=2 at step 3. Step 2 is a gap.
    assert base["queued_accelerator_hours_by_class"] == {"a": 16.0, "b": 2.0}
    assert base["queued_accelerator_hours"] == 18.0
    assert base["hours_with_queue_by_class"] == {"a": 2.0, "b": 1.0}
    assert base["mean_accelerators_waiting_by_class"] == {"a": 16.0 / 5, "b": 2.0 / 5}
    # On-prem serves 12 + 12 + 16 + 16 + 8 = 64 of 16 chips x 5 observed hours.
    assert base["onprem_utilization"] == pytest.approx(64 / 80)
    assert summary["observed_hours"] == 5.0
    assert "burst_spend_usd" not in base

    # The oracle bursts 1 node for steps 0-1 and 2 for step 3 (requested at the gap, an hour ahead): nothing
    # waits; paid node-hours on observed steps: 1 + 1 + 2 = 4, at $8 each.
    assert row["queued_accelerator_hours"] == 0.0
    assert row["hours_with_queue_by_class"] == {"a": 0.0, "b": 0.0}
    assert row["onprem_utilization"] == pytest.approx(64 / 80)
    assert row["burst_spend_by_pool_usd"] == {"burst": 32.0}
    assert row["burst_spend_usd"] == 32.0
    assert row["avoided_queued_accelerator_hours"] == 18.0
    assert row["usd_per_avoided_queued_accelerator_hour"] == pytest.approx(32.0 / 18.0, abs=1e-4)


def test_a_policy_that_never_bursts_reproduces_the_baseline(tmp_path: Path) -> None:
    settings, trace, window = hand_made(tmp_path)
    # The baseline itself run through the simulated cluster: the burst pool held at zero.
    raw = settings.model_dump(mode="json")
    raw["pools"][-1]["max_units"] = 0
    held = settings_from_mapping(raw, source="hybrid.yaml")
    run = run_policy(held, trace, window, "oracle")
    row = hybrid_summary(held.pool_specs(), window, {"none": run})["rows"]
    assert row["none"]["queued_accelerator_hours_by_class"] == row[BASELINE]["queued_accelerator_hours_by_class"]
    assert row["none"]["onprem_utilization"] == row[BASELINE]["onprem_utilization"]
    assert row["none"]["usd_per_avoided_queued_accelerator_hour"] is None


def test_results_and_report_carry_the_hybrid_section_only_for_a_hybrid_fleet(tmp_path: Path) -> None:
    settings, trace, window = hand_made(tmp_path)
    runs = {"oracle": run_policy(settings, trace, window, "oracle")}
    document = results_document(settings, "hybrid.yaml", trace, window, runs)
    assert document["hybrid"]["burst_pools"] == ["burst"]
    page = hybrid_section(document["hybrid"])
    assert "1.78" in page  # dollars per avoided queued accelerator-hour
    assert "16.0 (2.0 h)" in page  # tenant a's baseline queue
    raw = settings.model_dump(mode="json")
    raw["pools"] = raw["pools"][-1:]
    cloud_only = settings_from_mapping(raw, source="cloud.yaml")
    assert "hybrid" not in results_document(cloud_only, "cloud.yaml", trace, window, runs)
    assert hybrid_section(None) == ""


def test_hybrid_reference_scenario_keeps_each_tenants_quota_from_the_trace() -> None:
    settings = load_settings(ROOT / "config" / "examples" / "helios-hybrid.yaml")
    with gzip.open(ROOT / "data" / "helios-earth" / "demand_5min.csv.gz", "rt") as handle:
        frame = pd.read_csv(handle, usecols=["unique_id", "capacity"])
    quota = frame.dropna().groupby("unique_id")["capacity"].agg(["min", "max"])
    onprem = [p for p in settings.pool_specs() if p.kind is PoolKind.ON_PREM]
    assert len(onprem) == len(settings.demand_classes) == 16
    for pool in onprem:
        (tenant,) = pool.serves
        # pandas-stubs type a cell as any scalar; the capacities are float64, and np.float64 is a float
        lowest, highest = cast(float, quota.loc[tenant, "min"]), cast(float, quota.loc[tenant, "max"])
        assert lowest == highest == pool.max_units * pool.chips_per_unit
    burst = {p.tier.value: p for p in settings.pool_specs() if p.kind is not PoolKind.ON_PREM}
    assert set(burst) == {"spot", "on-demand"}
    for pool in burst.values():
        assert pool.chips_per_unit == 8 and len(pool.serves) == 16
        assert 10 <= pool.lead_time.total_seconds() / 60 <= 15
    assert burst["spot"].spot_interruption_per_hour > 0
    assert burst["spot"].price_per_chip_hour_usd < burst["on-demand"].price_per_chip_hour_usd


def test_waiting_is_priced_per_class_and_unknown_when_a_class_has_no_cost(tmp_path: Path) -> None:
    settings, trace, window = hand_made(tmp_path)
    runs = {"oracle": run_policy(settings, trace, window, "oracle")}
    # Two tiers 4x apart: a at $4 per queued accelerator-hour (16 queued), b at the planner's default $1 (2).
    raw = settings.model_dump(mode="json")
    raw["demand_classes"][0]["waiting_cost_per_accelerator_hour_usd"] = 4.0
    raw["planner"]["waiting_cost_per_accelerator_hour_usd"] = 1.0
    priced = settings_from_mapping(raw, source="hybrid.yaml")
    rows = results_document(priced, "hybrid.yaml", trace, window, runs)["hybrid"]["rows"]
    assert rows[BASELINE]["waiting_cost_usd"] == 16 * 4.0 + 2 * 1.0
    assert rows["oracle"]["waiting_cost_usd"] == 0.0
    assert rows["oracle"]["avoided_waiting_cost_usd"] == 66.0
    assert "avoided waiting cost" in hybrid_section(results_document(priced, "h.yaml", trace, window, runs)["hybrid"])
    # Without a cost for b (and no default), the waiting cost is unknown, never 0.
    raw["planner"]["waiting_cost_per_accelerator_hour_usd"] = None
    partly = settings_from_mapping(raw, source="hybrid.yaml")
    rows = results_document(partly, "hybrid.yaml", trace, window, runs)["hybrid"]["rows"]
    assert rows[BASELINE]["waiting_cost_usd"] is None
    assert rows["oracle"]["avoided_waiting_cost_usd"] is None


def test_burst_budget_bound_spends_first_come_in_time_order_and_value_aware_on_the_dearest() -> None:
    from bench.bench_burst_budget_bound import first_come, value_aware

    # Accelerator-hours queued per step (rows) and class (columns); class 1 waits at 4x the cost of class 0.
    queued = np.array([[2.0, 0.0], [1.0, 1.0], [0.0, 3.0]])
    cost = np.array([1.0, 4.0])
    # 3 accelerator-hours: first-come buys step 0 (2 x 1) and half of step 1 (0.5 x 1 + 0.5 x 4).
    assert first_come(queued, cost, 3.0) == pytest.approx(2.0 + 0.5 + 2.0)
    # value-aware buys class 1's 4 queued hours first: 3 of them.
    assert value_aware(queued, cost, 3.0) == pytest.approx(12.0)
    assert first_come(queued, cost, 100.0) == value_aware(queued, cost, 100.0) == pytest.approx(3.0 + 16.0)


def test_the_guarded_bound_pays_for_what_is_held_to_the_end_of_the_window() -> None:
    from bench.bench_burst_budget_bound import guarded_value_aware, value_aware

    # Two one-hour steps: 10 chips of the dear class (4x) wait in the first, 10 of the cheap class in the second.
    chips = np.array([[10.0, 0.0], [0.0, 10.0]])
    cost = np.array([4.0, 1.0])
    # Without the guard, 10 accelerator-hours all go to the dear class.
    assert value_aware(chips, cost, 10.0) == pytest.approx(40.0)
    # With it, a chip held at the first step is paid for both hours: at most 5 there (20), then 5 at the second.
    assert guarded_value_aware(chips, cost, 10.0, 1.0) == pytest.approx(25.0)
    assert guarded_value_aware(chips, cost, 100.0, 1.0) == pytest.approx(50.0)
