"""The simulated agent's ledger holds a budget's month period from its start: the simulation counts spend from
the window's start, so the spend before it is 0, not unknown, and no run raises a budget-ledger-incomplete alert
for it; the budget's own alerts still come when the spend the simulation counts crosses their thresholds."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
import pytest

from agent.simulation import select_window
from agent.simulation.budgets import budget_usage
from agent.simulation.runner import run_policy
from agent.sources.trace import read_trace
from config import settings_from_mapping
from models import AlertKind


@pytest.mark.parametrize("policy", ["forecast", "reactive"])
def test_a_window_starting_mid_period_raises_no_ledger_alert_and_the_budget_alerts_follow_its_spend(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, policy: str
) -> None:
    # Periods open on the 1st; the window opens on the 11th, after a day of history, at 16 chips (2 units of 8
    # USD an hour: 16 USD an hour). A cap of 200 USD: half of it is spent 6 hours 15 minutes into the window.
    stamps = pd.date_range("2024-01-10T00:00:00+00:00", periods=288 + 12 * 12, freq="5min")
    path = tmp_path / "trace.csv"
    frame = pd.DataFrame({"unique_id": "a", "ds": stamps.strftime("%Y-%m-%dT%H:%M:%S%z"), "y": 16.0})
    frame.to_csv(path, index=False)
    raw = {
        "demand_classes": [{"name": "a"}],
        "pools": [{"id": "gpu", "kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 10,
                   "price_per_chip_hour_usd": 1.0, "lead_time": "10m", "serves": ["a"]}],
        "forecast": {"history": "1d", "model": "last-value"},
        "budgets": [{"name": "b", "pools": ["gpu"], "monthly_cap_usd": 200.0, "alert_thresholds": [0.5]}],
    }  # fmt: skip
    settings = settings_from_mapping(raw, source="ledger.yaml")
    trace = read_trace(path)
    window = select_window(trace, settings.demand_class_models(), stamps[288].to_pydatetime(), None)
    with caplog.at_level(logging.WARNING):
        run = run_policy(settings, trace, window, policy)
    assert [a for a in run.alerts if a.kind is AlertKind.BUDGET_LEDGER_INCOMPLETE] == []
    assert not [r for r in caplog.records if "holds these of its pools only from later" in r.getMessage()]
    (usage,) = budget_usage(settings, window, run)
    crossed = window.index[int((usage.period_spend >= 100.0 - 1e-9).argmax())]
    (threshold,) = [a for a in run.alerts if a.kind is AlertKind.BUDGET_THRESHOLD]
    # The window's usage counts a step's spend at its start, the agent's ledger once the step has run and the pool
    # is read again: the alert comes within two steps of the crossing, not a step early (nothing counted before).
    assert crossed.to_pydatetime() <= threshold.at <= crossed.to_pydatetime() + 2 * window.step
