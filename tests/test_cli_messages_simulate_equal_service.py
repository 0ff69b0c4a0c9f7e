"""simulate's summary at the terminal gives each equal-service figure that is not at the target its own share of
demand unserved. Where even the cheapest setting tried left less unserved than the target, the figure is that
setting's cost at its own service, and the oracle is shown as it ran: the line 'same service (0.5% unserved):
reactive ..., forecast ...' read as two costs of one service while one policy served more of the demand than the
other, which only results.json and the report said."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import TraceWriter
from tests.scenario.test_simulate import run_cli

STEPS = 288 + 72  # a day of 5-minute steps for the history, then the six hours simulated
WINDOW = ["--start", "2024-01-02", "--end", "2024-01-02T06:00:00+00:00"]
ALREADY_MET = "the cheapest setting already meets the target"


def _simulate(tmp_path: Path, write_trace: TraceWriter) -> dict[str, Any]:
    config: dict[str, Any] = {
        "demand_classes": [{"name": "train-a100"}],
        "pools": [
            {
                "id": "a100-on-demand",
                "kind": "gpu-node-pool",
                "chips_per_unit": 8,
                "max_units": 50,
                "price_per_chip_hour_usd": 3.67,
                "lead_time": "10m",
                "serves": ["train-a100"],
            }
        ],
        "forecast": {"history": "1d"},
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "o"
    trace = write_trace({"train-a100": [30.0] * STEPS})  # steady demand: no setting leaves any of it waiting
    argv = ["simulate", "--config", str(path), "--trace", str(trace), "--out", str(out), *WINDOW]
    assert run_cli([*argv, "--policy", "forecast,reactive,oracle", "--no-progress"]) == 0
    document: dict[str, Any] = json.loads((out / "results.json").read_text())
    return document


def test_a_figure_below_the_target_is_printed_with_its_own_unserved_share(
    tmp_path: Path, write_trace: TraceWriter, capsys: pytest.CaptureFixture[str]
) -> None:
    document = _simulate(tmp_path, write_trace)
    printed = capsys.readouterr().out

    assert document["equal_service"], "the searches ran"
    for target, rows in document["equal_service"].items():
        (line,) = [x for x in printed.splitlines() if x.startswith(f"same service ({float(target):.1%} unserved): ")]
        for name in ("reactive", "forecast"):
            row = rows[name]
            assert row["note"] == ALREADY_MET and row["unserved_fraction"] < float(target)
            assert f"{name} {row['cost_usd']:,.0f} ({row['unserved_fraction']:.2%} unserved)" in line
            assert f"  {name}: {ALREADY_MET}" in printed
        oracle = rows["oracle"]
        assert f"oracle {oracle['cost_usd']:,.0f} ({oracle['unserved_fraction']:.2%} unserved, as run)" in line
