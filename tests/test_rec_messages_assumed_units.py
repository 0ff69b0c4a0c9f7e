"""``leadtime recommend`` says when the current units are assumed rather than read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.cli import main
from tests.prometheus.conftest import loaded_trace, prometheus  # noqa: F401  (the fixtures)
from tests.prometheus.server import PrometheusServer
from tests.prometheus.test_recommend import write_config

pytestmark = pytest.mark.xdist_group("prometheus")
AT = "2020-05-08T12:00+08:00"
POOL = "a100-on-demand"


def test_current_units_taken_as_min_units_are_said_to_be_assumed(
    prometheus: PrometheusServer,  # noqa: F811
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
    prometheus: PrometheusServer,  # noqa: F811
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
