"""``simulate`` refuses the static policy on a window without history before it at once, before any forecasting
(which takes minutes on a real trace), and offers the other policies asked for."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from agent.cli import main
from agent.simulation.runner import Simulation

START = "2024-01-01T00:00:00+00:00"


def _inputs(tmp_path: Path) -> tuple[Path, Path]:
    stamps = pd.date_range(START, periods=3 * 288, freq="5min")
    demand = 40.0 + 8.0 * np.sin(np.arange(len(stamps)) / 24.0)
    frame = pd.DataFrame({"unique_id": "a", "ds": stamps.strftime("%Y-%m-%dT%H:%M:%S%z"), "y": demand})
    trace = tmp_path / "trace.csv"
    frame.to_csv(trace, index=False)
    pool = {"id": "gpu", "kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 40,
            "price_per_chip_hour_usd": 1.0, "lead_time": "10m", "serves": ["a"]}  # fmt: skip
    document = {
        "demand_classes": [{"name": "a"}],
        "pools": [pool],
        "forecast": {"history": "1d", "model": "last-value"},
    }
    config = tmp_path / "leadtime.yaml"
    config.write_text(yaml.safe_dump(document), encoding="utf-8")
    return config, trace


@pytest.fixture
def no_forecasting(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("the window was forecast before the static policy was refused")

    monkeypatch.setattr(Simulation, "prepare", refuse)


@pytest.mark.parametrize(
    ("policies", "hint"),
    [
        ((), "; start the window later (--start), or leave the static policy out: --policy forecast,reactive,oracle"),
        (("--policy", "static,oracle"), ", or leave the static policy out: --policy oracle"),
        (("--policy", "static"), "; start the window later (--start)"),
    ],
)
@pytest.mark.usefixtures("no_forecasting")
def test_a_window_without_history_is_refused_for_the_static_policy_before_forecasting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], policies: tuple[str, ...], hint: str
) -> None:
    config, trace = _inputs(tmp_path)
    out = tmp_path / "out"
    args = ["simulate", "--config", str(config), "--trace", str(trace), "--start", START, *policies]
    assert main([*args, "--out", str(out), "--no-progress"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("leadtime: the static policy needs history before the window")
    assert error.rstrip().endswith(hint)
    assert not out.exists()
