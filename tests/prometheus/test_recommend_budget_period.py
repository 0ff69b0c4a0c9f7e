"""``leadtime recommend`` projects a monthly cap over the budget's own period: from its ``period_start_day`` at
local midnight to the same day next month, not over the calendar month."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.cli import main
from tests.prometheus.server import PrometheusServer
from tests.prometheus.test_recommend import write_config

pytestmark = pytest.mark.xdist_group("prometheus")
AT = "2020-05-08T04:00:00+00:00"  # in the period from 15 April to 15 May: 30 days, where May has 31
PRICE_PER_UNIT_HOUR = 8 * 3.67


def test_the_monthly_projection_spans_the_budgets_own_period(
    prometheus: PrometheusServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = [
        "recommend",
        "--config",
        str(write_config(tmp_path, prometheus, period_start_day=15)),
        "--out",
        str(out),
        "--at",
        AT,
    ]
    assert main([*argv, "--current-units", "a100-on-demand=10"]) == 0
    capsys.readouterr()
    document = json.loads((out / "recommendation.json").read_text(encoding="utf-8"))
    (budget,) = document["budgets"]
    assert budget["period_hours"] == 30 * 24
    assert (budget["period_start"], budget["period_end"]) == ("2020-04-15T00:00:00+00:00", "2020-05-15T00:00:00+00:00")
    # no spend so far is known (no ledger file): the units held from now to the 15th are projected
    hours_left = 6 * 24 + 20
    assert budget["hours_left"] == hours_left
    assert budget["current_projected_period_usd"] == pytest.approx(10 * PRICE_PER_UNIT_HOUR * hours_left, abs=0.01)
    (pool,) = document["pools"]
    recommended = pool["recommended_units"] * PRICE_PER_UNIT_HOUR * hours_left
    assert budget["recommended_fraction_of_monthly_cap"] == pytest.approx(recommended / 500000, abs=1e-4)
