"""The report says the oracle serves all demand only where its run did: spot interruptions leave demand unserved
that foresight cannot serve."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main
from agent.report.equal_service import equal_service_section
from tests.conftest import TraceWriter

NO_UNSERVED = "no demand is left unserved"


def _report(
    tmp_path: Path, trace: Path, interruptions: float, capsys: pytest.CaptureFixture[str]
) -> tuple[dict[str, Any], str]:
    pool = {
        "id": "spot",
        "kind": "gpu-node-pool",
        "tier": "spot",
        "chips_per_unit": 8,
        "max_units": 10,
        "price_per_chip_hour_usd": 1.0,
        "lead_time": "10m",
        "serves": ["a"],
        "spot_interruption_per_hour": interruptions,
    }
    config = tmp_path / f"spot-{interruptions}.yaml"
    config.write_text(yaml.safe_dump({"demand_classes": [{"name": "a"}], "pools": [pool]}), encoding="utf-8")
    out = tmp_path / f"out-{interruptions}"
    argv = ["simulate", "--config", str(config), "--trace", str(trace), "--policy", "oracle", "--out", str(out)]
    window = ["--start", "2024-01-01T00:00:00+00:00", "--end", "2024-01-01T03:00:00+00:00"]
    assert main([*argv, *window, "--equal-service", "none", "--no-progress"]) == 0
    capsys.readouterr()
    oracle = json.loads((out / "results.json").read_text(encoding="utf-8"))["policies"]["oracle"]
    return oracle, (out / "report.html").read_text(encoding="utf-8")


def test_the_oracle_is_not_said_to_serve_all_demand_when_interruptions_leave_some_unserved(
    tmp_path: Path, write_trace: TraceWriter, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_trace({"a": [16.0] * 36})
    oracle, page = _report(tmp_path, trace, 1.0, capsys)
    assert oracle["unserved_fraction"] > 0
    assert NO_UNSERVED not in page
    assert f"it still left {oracle['unserved_fraction']:.2%} of demand unserved" in page
    # without interruptions it serves everything, and says so
    oracle, page = _report(tmp_path, trace, 0.0, capsys)
    assert oracle["unserved_fraction"] == 0.0
    assert NO_UNSERVED in page


def test_the_equal_service_note_shows_the_oracle_as_it_ran() -> None:
    row = {"forecast": {"cost_usd": 10.0}, "oracle": {"cost_usd": 8.0, "unserved_fraction": 0.02}}
    page = equal_service_section({"0.005": row})
    assert "nothing unserved" not in page
    assert "as run, 2.00% unserved" in page
