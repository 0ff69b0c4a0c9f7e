"""``leadtime recommend`` says when the current units are assumed rather than read, and words the units the forecast
would release once seen idle as a further saving, not as a cost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.cli import main
from tests.prometheus.server import PrometheusServer
from tests.prometheus.test_recommend import write_config

pytestmark = pytest.mark.xdist_group("prometheus")
AT = "2020-05-08T12:00+08:00"
POOL = "a100-on-demand"


def test_current_units_taken_as_min_units_are_said_to_be_assumed(
    prometheus: PrometheusServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = write_config(tmp_path, prometheus)  # no cloud or aws section: nothing reads the pool
    out = tmp_path / "assumed"

    assert main(["recommend", "--config", str(config), "--out", str(out), "--at", AT]) == 0

    document = json.loads((out / "recommendation.json").read_text())
    assert document["pool_state_source"] == "min_units"
    assert document["pools"][0]["current_units"] == 0  # the pool's min_units
    (warning,) = [w for w in document["warnings"] if w.startswith("current units not read")]
    assert f"assumed min_units ({POOL}=0)" in warning
    assert "--current-units POOL=N" in warning and "cloud or aws section" in warning
    printed = capsys.readouterr()
    assert f"warning: {warning}" in printed.err
    assert " USD/day now (assumed), " in printed.out
    assert warning in (out / "report.md").read_text()


def test_current_units_given_are_not_said_to_be_assumed(
    prometheus: PrometheusServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = write_config(tmp_path, prometheus)
    out = tmp_path / "given"

    args = ["recommend", "--config", str(config), "--out", str(out), "--at", AT, "--current-units", f"{POOL}=12"]
    assert main(args) == 0

    document = json.loads((out / "recommendation.json").read_text())
    assert document["pool_state_source"] == "--current-units"
    assert not [w for w in document["warnings"] if w.startswith("current units not read")]
    printed = capsys.readouterr()
    assert "current units not read" not in printed.err
    assert " USD/day now, " in printed.out and "(assumed)" not in printed.out


def test_units_releasable_once_idle_read_as_a_further_saving(
    prometheus: PrometheusServer,
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, prometheus)
    out = tmp_path / "idle"

    args = ["recommend", "--config", str(config), "--out", str(out), "--at", AT, "--current-units", f"{POOL}=60"]
    assert main(args) == 0

    document = json.loads((out / "recommendation.json").read_text())
    saving = document["cost"]["releasable_once_idle_per_day_usd"]
    assert saving > 0  # 60 units held, the forecast allows fewer: none seen idle yet
    report = (out / "report.md").read_text()
    assert f"It would save a further {saving:,.2f} USD/day once the units the forecast would release" in report
    assert f"{saving:,.2f} USD/day more" not in report
