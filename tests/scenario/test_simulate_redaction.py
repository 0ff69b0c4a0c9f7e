"""``leadtime simulate`` records its configuration in ``results.json`` and the report: a Prometheus URL with
credentials in that configuration is written without them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agent.cli import main
from tests.conftest import TraceWriter

PASSWORD = "hunter2Secret"


def test_simulate_never_writes_the_prometheus_password(
    write_trace: TraceWriter, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_trace({"a": [8.0] * 300 + [16.0] * 60})
    config = tmp_path / "leadtime.yaml"
    raw = {
        "demand_classes": [{"name": "a"}],
        "pools": [
            {
                "id": "gpu",
                "kind": "gpu-node-pool",
                "chips_per_unit": 4,
                "max_units": 20,
                "price_per_chip_hour_usd": 2.0,
                "lead_time": "10m",
                "serves": ["a"],
            }
        ],
        "forecast": {"history": "1d", "model": "last-value"},
        "prometheus": {"url": f"https://admin:{PASSWORD}@prometheus.example:9090"},
    }
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    out = tmp_path / "out"
    args = ["simulate", "--config", str(config), "--trace", str(trace), "--start", "2024-01-02T00:00+00:00"]
    code = main([*args, "--policy", "forecast,reactive", "--equal-service", "none", "--no-progress", "--out", str(out)])
    assert code == 0
    written = {path.name: path.read_text(encoding="utf-8") for path in out.iterdir()}
    assert set(written) == {"results.json", "report.html"}
    assert all(PASSWORD not in text for text in written.values())
    recorded = json.loads(written["results.json"])["config"]["settings"]["prometheus"]["url"]
    assert recorded == "https://<redacted>@prometheus.example:9090"
    printed = capsys.readouterr()
    assert PASSWORD not in printed.out + printed.err
