"""``recommend --current-units``: units a pool cannot have are refused, naming the pool and its bounds, before
anything is read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main


def _config(tmp_path: Path) -> Path:
    document: dict[str, Any] = {
        "demand_classes": [{"name": "train"}],
        "pools": [
            {
                "id": "od",
                "kind": "gpu-node-pool",
                "chips_per_unit": 8,
                "min_units": 1,
                "max_units": 10,
                "price_per_chip_hour_usd": 1.0,
                "lead_time": "10m",
                "serves": ["train"],
            }
        ],
        # nothing listens here: the units are refused before Prometheus is read
        "prometheus": {"url": "http://127.0.0.1:9", "retries": 0},
    }
    path = tmp_path / "leadtime.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


@pytest.mark.parametrize("units", [0, 11, 50])
def test_units_outside_the_pools_bounds_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], units: int
) -> None:
    argv = ["recommend", "--config", str(_config(tmp_path)), "--out", str(tmp_path / "out")]
    assert main([*argv, "--current-units", f"od={units}"]) != 0
    err = capsys.readouterr().err.strip()
    assert f"--current-units: od={units} is outside the bounds of pool 'od': 1..10 units (min_units..max_units)" in err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "out").exists()
