"""Where the pools cannot hold every class, the simulated cluster serves the dearest waiting first; the oracle's
schedule and the hybrid fleet's on-prem-only baseline split demand the same way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main
from tests.conftest import TraceWriter

WINDOW = ["--start", "2024-01-01T00:00:00+00:00", "--end", "2024-01-01T02:00:00+00:00"]


def _pool(pool_id: str, kind: str, units: int, serves: list[str], **more: Any) -> dict[str, Any]:
    return {
        "id": pool_id,
        "kind": kind,
        "chips_per_unit": 8,
        "max_units": units,
        "price_per_chip_hour_usd": 1.0,
        "lead_time": "0s" if kind == "on-prem" else "10m",
        "serves": serves,
        **more,
    }


def _classes() -> list[dict[str, Any]]:
    # b waits at 100 times a's cost, and a comes first by name
    return [
        {"name": "a", "waiting_cost_per_accelerator_hour_usd": 1.0},
        {"name": "b", "waiting_cost_per_accelerator_hour_usd": 100.0},
    ]


def _simulate(
    tmp_path: Path, trace: Path, raw: dict[str, Any], policy: str, capsys: pytest.CaptureFixture[str]
) -> dict[str, Any]:
    config = tmp_path / "priority.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    out = tmp_path / "out"
    argv = ["simulate", "--config", str(config), "--trace", str(trace), "--policy", policy, "--out", str(out)]
    assert main([*argv, *WINDOW, "--equal-service", "none", "--no-progress"]) == 0
    capsys.readouterr()
    document: dict[str, Any] = json.loads((out / "results.json").read_text(encoding="utf-8"))
    return document


def test_the_oracle_buys_for_the_class_the_cluster_does_not_serve_first(
    tmp_path: Path, write_trace: TraceWriter, capsys: pytest.CaptureFixture[str]
) -> None:
    # One spot unit serves both classes, and only a may use on-demand: the cluster gives the spot unit to b, so
    # a needs an on-demand unit.
    pools = [
        _pool("shared", "gpu-node-pool", 1, ["a", "b"], tier="spot"),
        _pool("only-a", "gpu-node-pool", 10, ["a"], tier="on-demand"),
    ]
    trace = write_trace({"a": [8.0] * 24, "b": [8.0] * 24})
    document = _simulate(tmp_path, trace, {"demand_classes": _classes(), "pools": pools}, "oracle", capsys)
    oracle = document["policies"]["oracle"]
    assert oracle["unserved_accelerator_hours"] == 0.0
    assert oracle["spend_by_pool_usd"] == {"only-a": 16.0, "shared": 16.0}  # a unit each for the two hours


def test_the_on_prem_only_baseline_serves_the_dearest_waiting_first(
    tmp_path: Path, write_trace: TraceWriter, capsys: pytest.CaptureFixture[str]
) -> None:
    # 16 on-prem chips for 20 demanded, and a cloud pool held at zero: nothing bursts, so nothing is avoided.
    pools = [
        _pool("onprem", "on-prem", 2, ["a", "b"], min_units=2, price_per_chip_hour_usd=0.0),
        _pool("cloud", "gpu-node-pool", 0, ["a", "b"]),
    ]
    trace = write_trace({"a": [10.0] * 24, "b": [10.0] * 24})
    document = _simulate(tmp_path, trace, {"demand_classes": _classes(), "pools": pools}, "reactive", capsys)
    rows = document["hybrid"]["rows"]
    assert rows["on-prem only"]["queued_accelerator_hours_by_class"] == {"a": 8.0, "b": 0.0}  # 4 chips, 2 h
    assert rows["reactive"]["queued_accelerator_hours_by_class"] == {"a": 8.0, "b": 0.0}
    assert rows["reactive"]["avoided_waiting_cost_usd"] == 0.0
