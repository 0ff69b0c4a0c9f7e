"""``leadtime simulate`` with a budget below the unconstrained cost: the capped policies never spend over it,
the demand it leaves waiting is reported, and the alerts say why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from agent.cli import main

# one worker computes the module's simulation once, for every test that reads it
pytestmark = pytest.mark.xdist_group("simulate-budget")

# The old month period of this budget ends at 10:00 UTC on 2 January (midnight at UTC-10), inside the window.
BUDGET = {
    "name": "fleet",
    "pools": ["spot", "ondemand"],
    "monthly_cap_usd": 400.0,
    "hourly_cap_usd": 80.0,
    "period_start_day": 2,
    "timezone": "Etc/GMT+10",
}


def config(budgets: list[dict[str, Any]]) -> dict[str, Any]:
    pool = {"kind": "gpu-node-pool", "chips_per_unit": 4, "lead_time": "10m", "serves": ["a", "b"]}
    return {
        "demand_classes": [{"name": "a"}, {"name": "b"}],
        "pools": [
            {**pool, "id": "spot", "tier": "spot", "max_units": 10, "price_per_chip_hour_usd": 1.0,
             "spot_interruption_per_hour": 0.05},
            {**pool, "id": "ondemand", "max_units": 50, "price_per_chip_hour_usd": 2.0},
        ],
        "forecast": {"history": "1d"},
        "budgets": budgets,
    }  # fmt: skip


def simulate(tmp_path: Path, trace: Path, name: str, budgets: list[dict[str, Any]]) -> tuple[dict[str, Any], Path]:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config(budgets)))
    out = tmp_path / name
    argv = ["simulate", "--config", str(path), "--trace", str(trace), "--start", "2024-01-02T00:00:00+00:00"]
    # The budget's behaviour is in the policies' own runs; the equal-service search (each policy re-run at other
    # headrooms to meet a service target) leaves their rows as they are (compared: identical) and costs CPU.
    assert main([*argv, "--out", str(out), "--no-progress", "--equal-service", "none"]) == 0
    return json.loads((out / "results.json").read_text()), out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any], Path]:
    tmp = tmp_path_factory.mktemp("budget")
    rise = [4.0] * 300 + [4.0 + 2 * i for i in range(40)] + [84.0] * 100
    frames = [
        pd.DataFrame(
            {
                "unique_id": uid,
                "ds": pd.date_range("2024-01-01T00:00:00+00:00", periods=len(rise), freq="5min").strftime(
                    "%Y-%m-%dT%H:%M:%S%z"
                ),
                "y": np.asarray(values, dtype=float),
            }
        )
        for uid, values in {"a": rise, "b": [4.0] * len(rise)}.items()
    ]
    trace = tmp / "trace.csv"
    pd.concat(frames).to_csv(trace, index=False)
    free, _ = simulate(tmp, trace, "free", [])
    capped, out = simulate(tmp, trace, "capped", [BUDGET])
    return free["policies"], capped["policies"], out


def test_capped_policies_never_spend_over_the_cap(runs: tuple[dict[str, Any], dict[str, Any], Path]) -> None:
    _, capped, _ = runs
    for name in ("forecast", "reactive"):
        row = capped[name]
        assert row["budget_exceeded"] is False, name
        assert row["budgets"]["fleet"]["peak_period_spent_usd"] <= 400.0
        assert row["budgets"]["fleet"]["peak_hour_spent_usd"] <= 80.0
    # The cap is below what the demand costs: the oracle, which ignores budgets, breaks it.
    assert capped["oracle"]["budget_exceeded"] is True


def test_the_demand_a_cap_leaves_waiting_is_reported(runs: tuple[dict[str, Any], dict[str, Any], Path]) -> None:
    free, capped, _ = runs
    for name in ("forecast", "reactive"):
        assert free[name]["budget_exceeded"] is False and free[name]["budgets"] == {}
        assert capped[name]["cost_usd"] < free[name]["cost_usd"]
        assert capped[name]["unserved_fraction"] > free[name]["unserved_fraction"] + 0.2
        assert set(capped[name]["spend_by_pool_usd"]) == {"spot", "ondemand"}


def test_alerts_name_thresholds_and_the_overspend(runs: tuple[dict[str, Any], dict[str, Any], Path]) -> None:
    _, capped, out = runs
    raised = {(a["kind"], a["subject"]) for a in capped["forecast"]["alerts_raised"]}
    assert ("budget-threshold", "budget fleet: 50% of cap") in raised
    assert ("budget-threshold", "budget fleet: 80% of cap") in raised
    # At 10:00 UTC a new month period starts and the capacity bought late in the old one runs far over it.
    assert ("projected-overspend", "budget fleet (monthly)") in raised
    page = (out / "report.html").read_text()
    assert "Spend against each budget cap" in page


def test_each_period_opening_in_the_window_is_reported(runs: tuple[dict[str, Any], dict[str, Any], Path]) -> None:
    _, capped, _ = runs
    for name in ("forecast", "reactive", "static", "oracle"):
        [opening] = capped[name]["budgets"]["fleet"]["period_openings"]
        assert opening["opened_at"] == "2024-01-02T10:00:00+00:00"
        units = opening["units"]
        assert set(units) == {"spot", "ondemand"}
        # those units to the end of the period (2 February, 10:00 UTC: 744 hours), 4 chips at 1 and 2 USD
        assert opening["projected_usd"] == pytest.approx((units["spot"] * 4.0 + units["ondemand"] * 8.0) * 744)
        assert 0.0 < opening["spent_in_window_usd"] <= capped[name]["budgets"]["fleet"]["peak_period_spent_usd"]
