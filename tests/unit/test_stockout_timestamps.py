"""Stockout windows written with unquoted timestamps, which YAML reads as dates and times, mean what the quoted
text means: without an offset, UTC."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from tests.conftest import TraceWriter

CONFIG = """
demand_classes: [{name: a}]
pools:
  - {id: od, kind: gpu-node-pool, chips_per_unit: 8, max_units: 10, price_per_chip_hour_usd: 1.0, lead_time: 10m,
     serves: [a]}
simulation:
  stockouts:
    - {pool: od, start: START, end: END}
"""


def _simulate(tmp_path: Path, trace: Path, start: str, end: str, capsys: pytest.CaptureFixture[str]) -> Any:
    config = tmp_path / "stockout.yaml"
    config.write_text(CONFIG.replace("START", start).replace("END", end), encoding="utf-8")
    out = tmp_path / "out"
    argv = ["simulate", "--config", str(config), "--trace", str(trace), "--policy", "reactive", "--out", str(out)]
    window = ["--start", "2024-01-01T00:00:00+00:00", "--end", "2024-01-01T03:00:00+00:00"]
    assert main([*argv, *window, "--equal-service", "none", "--no-progress"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    return json.loads((out / "results.json").read_text(encoding="utf-8"))["policies"]["reactive"]


def test_unquoted_timestamps_mean_what_the_quoted_ones_do(
    tmp_path: Path, write_trace: TraceWriter, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_trace({"a": [8.0] * 12 + [40.0] * 24})  # demand rises at 01:00, inside the stockout
    quoted = _simulate(tmp_path, trace, '"2024-01-01T00:30:00"', '"2024-01-01T02:00:00+00:00"', capsys)
    elsewhere = _simulate(tmp_path, trace, '"2025-01-01T00:00:00"', '"2025-01-02T00:00:00"', capsys)
    assert quoted["unserved_accelerator_hours"] > elsewhere["unserved_accelerator_hours"]  # the stockout holds
    assert _simulate(tmp_path, trace, "2024-01-01T00:30:00", "2024-01-01T02:00:00+00:00", capsys) == quoted
    assert _simulate(tmp_path, trace, "2024-01-01 00:30:00Z", "2024-01-01T04:00:00+02:00", capsys) == quoted
    # A date alone is its midnight (UTC), quoted or not: the window starts before the rise either way.
    assert _simulate(tmp_path, trace, "2024-01-01", "2024-01-01T02:00:00Z", capsys) == _simulate(
        tmp_path, trace, '"2024-01-01"', '"2024-01-01T02:00:00Z"', capsys
    )


def test_unquoted_timestamps_are_still_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "stockout.yaml"
    # 00:00 at +05:00 is 19:00 UTC the day before: before the start, read as UTC
    config.write_text(CONFIG.replace("START", "2024-01-01T00:00:00").replace("END", "2024-01-01T00:00:00+05:00"))
    assert main(["validate-config", str(config)]) != 0
    assert "simulation.stockouts[0].end: must be after start" in capsys.readouterr().err
