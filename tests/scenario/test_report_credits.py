"""``leadtime simulate`` credits the trace it actually replayed, as ``data/README.md`` requires of each bundled one
(here ServeGen), and no bundled trace for a user's own; ``results.json`` and the report say which leadtime made
them, and the report when, from which config, at what prices and service level."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from agent.cli import main
from agent.version import package_version
from tests.conftest import TraceWriter

ROOT = Path(__file__).resolve().parents[2]
SERVEGEN = ROOT / "data" / "servegen" / "demand_10min.csv.gz"


def _simulate(tmp_path: Path, trace: Path, classes: list[str], family: str, start: str, end: str) -> Path:
    config = {
        "demand_classes": [{"name": c, "family": family} for c in classes],
        "pools": [
            {
                "id": "pool",
                "kind": "tpu-slice-group" if family == "tpu" else "gpu-node-pool",
                "family": family,
                "chips_per_unit": 8,
                "max_units": 100,
                "price_per_chip_hour_usd": 1.2,
                "lead_time": "10m",
                "serves": classes,
            }
        ],
        "forecast": {"history": "1d", "model": "last-value"},
    }
    path = tmp_path / "leadtime.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    out = tmp_path / "out"
    args = ["simulate", "--config", str(path), "--trace", str(trace), "--start", start, "--end", end]
    assert (
        main([*args, "--policy", "forecast,reactive", "--equal-service", "none", "--no-progress", "--out", str(out)])
        == 0
    )
    return out


def _read(out: Path) -> tuple[dict[str, Any], str]:
    return json.loads((out / "results.json").read_text(encoding="utf-8")), (out / "report.html").read_text("utf-8")


def test_a_servegen_replay_credits_servegen_and_says_what_made_the_report(tmp_path: Path) -> None:
    out = _simulate(
        tmp_path, SERVEGEN, ["servegen/m-mid"], "tpu", "2025-03-05T00:00:00+08:00", "2025-03-05T12:00:00+08:00"
    )
    document, page = _read(out)
    assert document["leadtime_version"] == package_version()
    assert "Xiang et al." in document["trace"]["attribution"]
    assert "Xiang et al." in page and "arXiv:2505.09999" in page
    assert "Hu et al." not in page and "Jeon et al." not in page
    assert f"leadtime {package_version()}" in page and "report generated " in page
    assert str(tmp_path / "leadtime.yaml") in page
    assert "1.20 per chip-hour" in page and "9.60" in page  # an 8-chip slice
    assert document["forecast_service_levels"] == {"servegen/m-mid": 0.9}
    assert "service level 0.9 (every demand class)" in page
    assert "An accelerator-hour is one accelerator for one hour: here a chip-hour." in page
    assert "report generated" not in json.dumps(document)  # results.json stays the same for the same inputs


def test_a_users_own_trace_gets_no_bundled_credit(tmp_path: Path, write_trace: TraceWriter) -> None:
    trace = write_trace({"a": [8.0] * 300 + [16.0] * 60}, name="demand_5min.csv.gz")
    out = _simulate(tmp_path, trace, ["a"], "gpu", "2024-01-02T00:00+00:00", "2024-01-02T06:00+00:00")
    document, page = _read(out)
    assert document["trace"]["attribution"] is None
    assert "Trace data:" not in page and "Hu et al." not in page
    assert "1.20 per GPU-hour" in page and "here a GPU-hour." in page


def test_the_added_keys_are_documented() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for key in ("leadtime_version", "trace.attribution", "forecast_service_levels", "trials"):
        assert f"`{key}`" in readme, key
