"""The budget chart's panels are titled for what they show: the spend is counted from the window's start, so a
month period (or clock hour) open before it says so, and one that opens at the window's start does not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agent.report.simulation import budget_chart_panels
from agent.simulation.runner import run_policy
from tests.unit.test_burst_budget import hybrid

CAPS = {"monthly_cap_usd": 150.0, "hourly_cap_usd": 20.0}


def _panels(tmp_path: Path, **budget: Any) -> list[tuple[str, dict[str, np.ndarray], float]]:
    settings, trace, window = hybrid(
        tmp_path, [{"name": "burst", "pools": ["spot"], **CAPS, **budget}], {"a": 1.0, "b": 4.0}
    )
    runs = {"static": run_policy(settings, trace, window, "static")}
    return budget_chart_panels(window, runs, settings)


def test_a_month_period_open_before_the_window_is_titled_as_spend_from_the_windows_start(tmp_path: Path) -> None:
    # The window is 2024-01-02 (UTC); the month period opened on 2024-01-01, a day before.
    (month, cap), (hour, _) = [(title, cap) for title, _, cap in _panels(tmp_path)]
    assert month == (
        "burst: spend this month period, counted from the window's start (2024-01-02 00:00 UTC) in the month "
        "period open then"
    )
    assert cap == 150.0
    assert hour == "burst: spend this hour"  # the window starts on the hour


@pytest.mark.parametrize("timezone", ["UTC", "Asia/Kolkata"])
def test_a_month_period_that_opens_at_the_windows_start_is_spend_this_period(tmp_path: Path, timezone: str) -> None:
    titles = [title for title, _, _ in _panels(tmp_path, period_start_day=2, timezone=timezone)]
    if timezone == "UTC":
        assert titles == ["burst: spend this month period", "burst: spend this hour"]
    else:  # the period opened at 2024-01-01 18:30 UTC, the hour at 23:30 UTC
        assert titles == [
            "burst: spend this month period, counted from the window's start (2024-01-02 00:00 UTC) in the month "
            "period open then",
            "burst: spend this hour, counted from the window's start (2024-01-02 00:00 UTC) in the hour open then",
        ]


def test_the_spend_drawn_starts_at_zero_at_the_windows_start(tmp_path: Path) -> None:
    (_, spend, _), _ = _panels(tmp_path)
    static = spend["static"]
    assert static[0] > 0.0 and static[0] < static[-1]  # the first step's own spend, not the month's so far
