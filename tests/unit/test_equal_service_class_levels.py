"""The equal-service search plans every demand class at the level it tries, in place of the classes' own levels:
with a level of their own the classes were planned the same in every trial, and no level seemed to meet a
target."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main
from tests.conftest import TraceWriter

# Class a alternates between 10 and 20 accelerators every hour, b holds 4: a low quantile of the last value
# provisions for 10 and leaves a's hours at 20 partly unserved, a high one provisions for 20.
HOURS = 30
DEMAND = {"a": [10.0 if (i // 12) % 2 == 0 else 20.0 for i in range(HOURS * 12)], "b": [4.0] * (HOURS * 12)}


def _config() -> dict[str, Any]:
    return {
        "demand_classes": [{"name": "a", "service_level": 0.6}, {"name": "b", "service_level": 0.6}],
        "pools": [
            {
                "id": "od",
                "kind": "gpu-node-pool",
                "chips_per_unit": 8,
                "max_units": 10,
                "price_per_chip_hour_usd": 1.0,
                "lead_time": "10m",
                "serves": ["a", "b"],
            }
        ],
        "forecast": {"model": "last-value", "history": "1d"},
    }


def test_the_level_search_varies_the_level_of_classes_that_set_their_own(
    tmp_path: Path, write_trace: TraceWriter, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_trace(DEMAND)
    config = tmp_path / "levels.yaml"
    config.write_text(yaml.safe_dump(_config()), encoding="utf-8")
    out = tmp_path / "out"
    window = ["--start", "2024-01-02T00:00:00+00:00", "--end", "2024-01-02T03:00:00+00:00"]
    argv = ["simulate", "--config", str(config), "--trace", str(trace), "--out", str(out), *window]
    assert main([*argv, "--policy", "forecast,reactive", "--equal-service", "0.005", "--no-progress"]) == 0
    capsys.readouterr()
    document = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert document["policies"]["forecast"]["unserved_fraction"] > 0.005  # as run, at the classes' 0.6
    found = document["equal_service"]["0.005"]["forecast"]
    assert found["cost_usd"] is not None, found
    low, high = found["trials"]
    assert low["service_level"] < high["service_level"]
    assert low["unserved_fraction"] > 0.005 >= high["unserved_fraction"]
    assert "in place of the classes' own levels" in document["equal_service_method"]
    assert "in place of the classes' own levels" in (out / "report.html").read_text(encoding="utf-8")
